import CNetSupport

#if canImport(Glibc)
    import Glibc
#endif

/// Holds the wildcard UDP port 5353 when no other mDNS stack does, so that a legacy unicast query sent to our
/// address meets a socket (and not an ICMP port-unreachable, which makes a connected querier like `dig` give up
/// before our answer arrives). It is never read: a socket filter that accepts nothing makes the kernel drop what
/// arrives (the capture is the responder's input), and `IP_MULTICAST_ALL` / `IPV6_MULTICAST_ALL` are off so that
/// the groups joined by the interfaces' mDNS sockets are not delivered to it as well.
///
/// It binds first without reuse options and only then sets `SO_REUSEADDR`, as avahi-daemon does: if avahi holds
/// the port, the bind fails and nothing is held; if avahi starts later, its retry with reuse options shares the
/// port and, being bound last, receives the unicast, as it should.
final class UnicastPortHolder: @unchecked Sendable {
    private(set) var fileDescriptors: [Int32] = []
    private(set) var families: [String] = []

    /// Nil when the port is taken (another mDNS stack runs on this host) for both families.
    init?(port: UInt16) {
        for (family, name) in [(AF_INET, "IPv4"), (AF_INET6, "IPv6")] {
            let descriptor = sp_hold_udp_port(family, port)
            guard descriptor >= 0 else { continue }
            fileDescriptors.append(descriptor)
            families.append(name)
        }
        if fileDescriptors.isEmpty { return nil }
    }

    func close() {
        for descriptor in fileDescriptors { Glibc.close(descriptor) }
        fileDescriptors = []
    }
}
