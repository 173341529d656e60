public import Logging

#if canImport(Glibc)
    import Glibc
#endif

/// The kernel settings that undo a sleep proxy, checked when an interface starts serving. The triggering SYN must
/// only be observed: a forwarding or redirecting kernel would answer or pass it on (PROTOCOL.md section 6 item 8),
/// and proxy ARP/ND would answer for the sleeper alongside the proxy.
public enum KernelSettings {
    /// Logs a warning for each setting of `interface` that deserves one.
    public static func warn(interface: String, logger: Logger) {
        for warning in warnings(interface: interface, read: readSysctl) {
            logger.warning("\(warning)")
        }
    }

    /// The warnings the kernel's settings for `name` deserve, from `read` (a sysctl's path to its value): IP
    /// forwarding and proxy ARP/NDP, on the interface or for all; ICMP redirects only where IPv4 forwards, since
    /// the kernel sends them only for packets it forwards (Debian's `send_redirects = 1` alone is harmless).
    static func warnings(interface name: String, read: (String) -> String?) -> [String] {
        // The sysctl's name and its file: an interface name may hold dots (a VLAN, `eth0.20`), so one is not
        // made from the other.
        func setting(_ sysctl: String, _ path: String) -> (sysctl: String, value: String)? {
            guard let value = read(path), value != "0" else { return nil }
            return (sysctl, value)
        }
        func warning(_ found: (sysctl: String, value: String)) -> String {
            "\(found.sysctl) is \(found.value): this host may answer or forward traffic for sleeping hosts; set \(found.sysctl)=0"
        }
        let forwarding = [
            setting("net.ipv4.ip_forward", "/proc/sys/net/ipv4/ip_forward"),
            setting("net.ipv4.conf.\(name).forwarding", "/proc/sys/net/ipv4/conf/\(name)/forwarding"),
        ].compactMap(\.self)
        var warnings = forwarding.map(warning)
        if let found = setting("net.ipv4.conf.\(name).proxy_arp", "/proc/sys/net/ipv4/conf/\(name)/proxy_arp") {
            warnings.append(warning(found))
        }
        if !forwarding.isEmpty {
            let redirects = [
                setting("net.ipv4.conf.all.send_redirects", "/proc/sys/net/ipv4/conf/all/send_redirects"),
                setting("net.ipv4.conf.\(name).send_redirects", "/proc/sys/net/ipv4/conf/\(name)/send_redirects"),
            ].compactMap(\.self)
            warnings += redirects.map { found in
                "\(found.sysctl) is \(found.value) and IPv4 forwarding is on: this host may redirect connections meant for sleeping hosts; set \(found.sysctl)=0"
            }
        }
        warnings += [
            setting("net.ipv6.conf.\(name).forwarding", "/proc/sys/net/ipv6/conf/\(name)/forwarding"),
            setting("net.ipv6.conf.\(name).proxy_ndp", "/proc/sys/net/ipv6/conf/\(name)/proxy_ndp"),
        ].compactMap(\.self).map(warning)
        return warnings
    }

    /// A sysctl's value, from its file under `/proc/sys`; nil when it cannot be read.
    static func readSysctl(_ path: String) -> String? {
        let descriptor = open(path, O_RDONLY)
        guard descriptor >= 0 else { return nil }
        defer { close(descriptor) }
        var buffer = [UInt8](repeating: 0, count: 32)
        let count = buffer.withUnsafeMutableBytes { read(descriptor, $0.baseAddress, $0.count) }
        guard count > 0 else { return nil }
        return String(decoding: buffer[0..<count].filter { $0 > 0x20 }, as: UTF8.self)
    }
}
