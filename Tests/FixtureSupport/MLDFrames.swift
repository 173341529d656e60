public import NetworkAddresses

/// MLD queries as a querier (a router, a snooping switch) puts them on the wire, built byte by byte here so that
/// tests of the code that reads them do not trust that code.
public enum MLDFrames {
    /// The one's-complement sum of RFC 1071 over the IPv6 pseudo-header and `icmp`.
    public static func checksum(source: IPv6Address, destination: IPv6Address, icmp: [UInt8]) -> UInt16 {
        var bytes = source.bytes + destination.bytes
        let length = UInt32(icmp.count)
        bytes += [UInt8(length >> 24), UInt8(length >> 16 & 0xFF), UInt8(length >> 8 & 0xFF), UInt8(length & 0xFF)]
        bytes += [0, 0, 0, 58] + icmp
        if bytes.count % 2 == 1 { bytes.append(0) }
        var sum: UInt32 = 0
        for index in stride(from: 0, to: bytes.count, by: 2) {
            sum += UInt32(bytes[index]) << 8 | UInt32(bytes[index + 1])
        }
        while sum > 0xFFFF { sum = (sum & 0xFFFF) + (sum >> 16) }
        return ~UInt16(sum)
    }

    /// A query frame as a querier sends it: Ethernet, IPv6 (hop limit 1, next header Hop-by-Hop), the Hop-by-Hop
    /// header with Router Alert, the query (24 bytes for MLDv1, 28 for MLDv2).
    public static func query(
        version2: Bool = true, group: IPv6Address = .unspecified, code: UInt16 = 10_000,
        source: IPv6Address = IPv6Address("fe80::9")!,
        sourceMAC: MACAddress = MACAddress(0x02, 0x77, 0, 0, 0, 9), hopLimit: UInt8 = 1, routerAlert: Bool = true,
        corrupt: Bool = false
    ) -> [UInt8] {
        let destination = group.isUnspecified ? IPv6Address.allNodes : group
        var icmp: [UInt8] = [130, 0, 0, 0, UInt8(code >> 8), UInt8(code & 0xFF), 0, 0] + group.bytes
        if version2 { icmp += [0x02, 125, 0, 0] }  // S=0 QRV=2, QQIC 125 s, no sources
        let sum = checksum(source: source, destination: destination, icmp: icmp)
        icmp[2] = UInt8(sum >> 8)
        icmp[3] = UInt8(sum & 0xFF) ^ (corrupt ? 1 : 0)
        let hopByHop: [UInt8] = routerAlert ? [58, 0, 5, 2, 0, 0, 1, 0] : [58, 0, 1, 4, 0, 0, 0, 0]
        let payload = hopByHop + icmp
        var frame = MACAddress(ipv6Multicast: destination).array + sourceMAC.array + [0x86, 0xDD]
        frame += [0x60, 0, 0, 0, UInt8(payload.count >> 8), UInt8(payload.count & 0xFF), 0, hopLimit]
        frame += source.bytes + destination.bytes + payload
        return frame
    }
}
