import Frames
public import NetworkAddresses

/// What points the LAN's neighbour caches back at this host after a wake. While it slept the proxy claimed its
/// addresses with its own MAC, and letting go sends nothing, so peers would go on sending to the proxy until their
/// entries age out (tens of seconds; the retransmitted SYN of the connection that woke the host among them). A
/// Mac's kernel announces its addresses on every wake; Linux does not (`arp_notify` and `ndisc_notify` are off by
/// default), so the client does it with its mDNS announcement.
public enum NeighbourAnnouncement {
    /// `IFA_F_TENTATIVE` (which the kernel sets with `IFA_F_OPTIMISTIC` and `IFA_F_DADFAILED` too): an address
    /// whose duplicate address detection is not over, or failed, may be another node's, and announcing it with
    /// Override would take that node's traffic.
    static let tentativeFlag: UInt32 = 0x40

    /// The IPv6 addresses of `interface` in the text of `/proc/net/if_inet6` (a line per address: 32 hex digits,
    /// then the interface index, prefix length, scope and flags in hex, then the interface's name): `settled`,
    /// those whose duplicate address detection is over and passed, which are this host's to announce, and
    /// `tentative`, the others.
    public static func ipv6Addresses(
        procText: String, interface: String
    ) -> (settled: [IPv6Address], tentative: [IPv6Address]) {
        var settled: [IPv6Address] = []
        var tentative: [IPv6Address] = []
        for line in procText.split(separator: "\n") {
            let fields = line.split(separator: " ", omittingEmptySubsequences: true)
            guard fields.count == 6, fields[5] == interface, fields[0].count == 32,
                let flags = UInt32(fields[4], radix: 16)
            else { continue }
            var bytes: [UInt8] = []
            var digits = fields[0].makeIterator()
            while let high = digits.next(), let low = digits.next(), let byte = UInt8(String([high, low]), radix: 16) {
                bytes.append(byte)
            }
            guard let address = IPv6Address(bytes: bytes), bytes.count == 16 else { continue }
            if flags & Self.tentativeFlag == 0 { settled.append(address) } else { tentative.append(address) }
        }
        return (settled, tentative)
    }

    /// The frames, sent from `mac`: a gratuitous ARP (RFC 5227 announcement) for each IPv4 address and an
    /// unsolicited Neighbour Advertisement for each IPv6 address (RFC 4861 section 7.2.6: from the address to
    /// all nodes, Override, the target link-layer address; Router clear, as a machine that sleeps is not the
    /// LAN's router). Padded to Ethernet's 60 bytes: a raw socket sends what it is given.
    public static func frames(mac: MACAddress, addresses: [IPAddress]) -> [[UInt8]] {
        addresses.map { EthernetFrame.addressAnnouncement(of: $0, source: mac).paddedToMinimumLength().serialized() }
    }
}
