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
        var v4 = sockaddr_in()
        v4.sin_family = sa_family_t(AF_INET)
        v4.sin_port = port.bigEndian
        if let descriptor = Self.bind(family: AF_INET, address: &v4, length: MemoryLayout<sockaddr_in>.size) {
            fileDescriptors.append(descriptor)
            families.append("IPv4")
        }
        var v6 = sockaddr_in6()
        v6.sin6_family = sa_family_t(AF_INET6)
        v6.sin6_port = port.bigEndian
        if let descriptor = Self.bind(family: AF_INET6, address: &v6, length: MemoryLayout<sockaddr_in6>.size) {
            fileDescriptors.append(descriptor)
            families.append("IPv6")
        }
        if fileDescriptors.isEmpty { return nil }
    }

    private static func bind<Address>(family: Int32, address: inout Address, length: Int) -> Int32? {
        let descriptor = socket(
            family, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard descriptor >= 0 else { return nil }
        var on: Int32 = 1
        if family == AF_INET6 {
            _ = setsockopt(descriptor, Int32(IPPROTO_IPV6), IPV6_V6ONLY, &on, socklen_t(MemoryLayout<Int32>.size))
        }
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.bind(descriptor, $0, socklen_t(length)) }
        }
        guard bound == 0 else {
            Glibc.close(descriptor)
            return nil
        }
        _ = setsockopt(descriptor, SOL_SOCKET, SO_REUSEADDR, &on, socklen_t(MemoryLayout<Int32>.size))
        // IP_MULTICAST_ALL (49) and IPV6_MULTICAST_ALL (29) off: not every group that any socket here joined.
        var off: Int32 = 0
        let (level, option) = family == AF_INET ? (Int32(IPPROTO_IP), Int32(49)) : (Int32(IPPROTO_IPV6), Int32(29))
        _ = setsockopt(descriptor, level, option, &off, socklen_t(MemoryLayout<Int32>.size))
        _ = sp_discard_input(descriptor)
        return descriptor
    }

    func close() {
        for descriptor in fileDescriptors { Glibc.close(descriptor) }
        fileDescriptors = []
    }
}
