import Frames
public import NetworkAddresses

/// What points the LAN's neighbour caches back at this host after a wake. While it slept the proxy claimed its
/// addresses with its own MAC, and letting go sends nothing, so peers would go on sending to the proxy until their
/// entries age out (tens of seconds; the retransmitted SYN of the connection that woke the host among them). A
/// Mac's kernel announces its addresses on every wake; Linux does not (`arp_notify` and `ndisc_notify` are off by
/// default), so the client does it with its mDNS announcement.
public enum NeighbourAnnouncement {
    /// `IFA_F_OPTIMISTIC`, `IFA_F_DADFAILED` and `IFA_F_TENTATIVE`: an address whose duplicate address detection
    /// is not over (it runs again when the link comes back) or failed may be another node's, and announcing it
    /// with Override would take that node's traffic (Linux announces neither, RFC 4429 section 3.3).
    static let unsettledFlags: UInt32 = 0x04 | 0x08 | 0x40

    /// The IPv6 addresses of `interface` that are this host's to announce, from the text of `/proc/net/if_inet6`
    /// (a line per address: 32 hex digits, then the interface index, prefix length, scope and flags in hex, then the
    /// interface's name): those whose duplicate address detection is over and passed.
    public static func settledIPv6(procText: String, interface: String) -> [IPv6Address] {
        procText.split(separator: "\n").compactMap { line in
            let fields = line.split(separator: " ", omittingEmptySubsequences: true)
            guard fields.count == 6, fields[5] == interface, fields[0].count == 32,
                let flags = UInt32(fields[4], radix: 16), flags & unsettledFlags == 0
            else { return nil }
            var bytes: [UInt8] = []
            var digits = fields[0].makeIterator()
            while let high = digits.next(), let low = digits.next() {
                guard let byte = UInt8(String([high, low]), radix: 16) else { return nil }
                bytes.append(byte)
            }
            return IPv6Address(bytes: bytes)
        }
    }

    /// The frames, sent from `mac`: a gratuitous ARP (RFC 5227 announcement) for each IPv4 address and an
    /// unsolicited Neighbour Advertisement for each IPv6 address (RFC 4861 section 7.2.6: from the address to
    /// all nodes, Override, the target link-layer address; Router clear, as a machine that sleeps is not the
    /// LAN's router).
    public static func frames(mac: MACAddress, addresses: [IPAddress]) -> [[UInt8]] {
        addresses.map { address in
            switch address {
            case .v4(let v4):
                return EthernetFrame.arpAnnouncement(of: v4, source: mac).paddedToMinimumLength().serialized()
            case .v6(let v6):
                return EthernetFrame.neighborAdvertisement(
                    for: v6, flags: [.override], targetLinkLayerAddress: mac, sourceAddress: v6, source: mac
                ).serialized()
            }
        }
    }
}
