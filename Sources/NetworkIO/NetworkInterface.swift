#if canImport(Glibc)
    import Glibc
#endif

/// One network interface as seen from the calling thread's network namespace: index, hardware address and IP
/// addresses, read with `getifaddrs`.
public struct NetworkInterface: Sendable, Hashable {
    /// An IP address assigned to the interface, with its prefix length.
    public struct Address: Sendable, Hashable, CustomStringConvertible {
        /// 4 bytes for IPv4, 16 for IPv6, in network order.
        public var bytes: [UInt8]
        public var prefixLength: Int
        /// The IPv6 scope (interface index) of a link-local address; 0 otherwise.
        public var scopeID: UInt32

        public init(bytes: [UInt8], prefixLength: Int, scopeID: UInt32 = 0) {
            self.bytes = bytes
            self.prefixLength = prefixLength
            self.scopeID = scopeID
        }

        /// Whether this is an IPv6 link-local address (`fe80::/10`).
        public var isIPv6LinkLocal: Bool {
            bytes.count == 16 && bytes[0] == 0xFE && bytes[1] & 0xC0 == 0x80
        }

        /// The address in text form, without the prefix length (`10.77.0.1`, `fe80::1`).
        public var address: String {
            let family = bytes.count == 4 ? AF_INET : AF_INET6
            var text = [CChar](repeating: 0, count: Int(INET6_ADDRSTRLEN))
            let converted = bytes.withUnsafeBytes { raw in
                inet_ntop(family, raw.baseAddress, &text, socklen_t(text.count)) != nil
            }
            guard converted else { return bytes.map(String.init).joined(separator: ".") }
            return text.withUnsafeBufferPointer { String(cString: $0.baseAddress!) }
        }

        public var description: String { "\(address)/\(prefixLength)" }
    }

    public var name: String
    /// The kernel's interface index.
    public var index: UInt32
    /// The 6-byte Ethernet address, or `nil` if the interface has none of that length.
    public var macAddress: [UInt8]?
    public var ipv4Addresses: [Address]
    public var ipv6Addresses: [Address]
    /// `IFF_UP`: administratively up.
    public var isUp: Bool

    public init(
        name: String,
        index: UInt32,
        macAddress: [UInt8]?,
        ipv4Addresses: [Address],
        ipv6Addresses: [Address],
        isUp: Bool
    ) {
        self.name = name
        self.index = index
        self.macAddress = macAddress
        self.ipv4Addresses = ipv4Addresses
        self.ipv6Addresses = ipv6Addresses
        self.isUp = isUp
    }

    /// The MAC address as `02:77:00:00:00:01`, or `nil`.
    public var macAddressString: String? {
        macAddress.map { mac in
            mac.map { byte in
                let hex = String(byte, radix: 16)
                return byte < 0x10 ? "0" + hex : hex
            }.joined(separator: ":")
        }
    }

    /// All interfaces of the calling thread's network namespace, in kernel order.
    public static func all() throws -> [NetworkInterface] {
        var list: UnsafeMutablePointer<ifaddrs>?
        guard getifaddrs(&list) == 0 else {
            throw SystemError.listFailed(SystemCallError("list the network interfaces (getifaddrs)"))
        }
        defer { freeifaddrs(list) }

        var interfaces: [NetworkInterface] = []
        var positions: [String: Int] = [:]
        var entry = list
        while let current = entry {
            defer { entry = current.pointee.ifa_next }
            let item = current.pointee
            guard let namePointer = item.ifa_name else { continue }
            let name = String(cString: namePointer)
            let position: Int
            if let known = positions[name] {
                position = known
            } else {
                position = interfaces.count
                positions[name] = position
                interfaces.append(
                    NetworkInterface(
                        name: name,
                        index: if_nametoindex(namePointer),
                        macAddress: nil,
                        ipv4Addresses: [],
                        ipv6Addresses: [],
                        isUp: item.ifa_flags & UInt32(IFF_UP) != 0
                    )
                )
            }
            guard let address = item.ifa_addr else { continue }
            switch Int32(address.pointee.sa_family) {
            case AF_PACKET:
                // struct sockaddr_ll (linux/if_packet.h, not in the Glibc module): ifindex at offset 4,
                // halen at 11, addr[8] at 12.
                let link = UnsafeRawPointer(address)
                if link.load(fromByteOffset: 11, as: UInt8.self) == 6 {
                    interfaces[position].macAddress = (12..<18).map { link.load(fromByteOffset: $0, as: UInt8.self) }
                }
                if interfaces[position].index == 0 {
                    interfaces[position].index = UInt32(link.loadUnaligned(fromByteOffset: 4, as: Int32.self))
                }
            case AF_INET:
                let inet = UnsafeRawPointer(address).loadUnaligned(as: sockaddr_in.self)
                let bytes = withUnsafeBytes(of: inet.sin_addr) { Array($0) }
                interfaces[position].ipv4Addresses.append(
                    Address(bytes: bytes, prefixLength: prefixLength(item.ifa_netmask, family: AF_INET))
                )
            case AF_INET6:
                let inet6 = UnsafeRawPointer(address).loadUnaligned(as: sockaddr_in6.self)
                let bytes = withUnsafeBytes(of: inet6.sin6_addr) { Array($0) }
                interfaces[position].ipv6Addresses.append(
                    Address(
                        bytes: bytes,
                        prefixLength: prefixLength(item.ifa_netmask, family: AF_INET6),
                        scopeID: inet6.sin6_scope_id
                    )
                )
            default:
                continue
            }
        }
        return interfaces
    }

    /// The interface called `name` in the calling thread's network namespace.
    ///
    /// - Throws: ``SystemError`` with code ``SystemError/Code/interfaceNotFound`` if there is none.
    public static func named(_ name: String) throws -> NetworkInterface {
        guard let interface = try all().first(where: { $0.name == name }) else {
            throw SystemError.interfaceNotFound(name)
        }
        return interface
    }

    /// The name of the interface with index `index` in the calling thread's network namespace; nil if there is
    /// none.
    public static func name(ofIndex index: UInt32) -> String? {
        var buffer = [CChar](repeating: 0, count: Int(IF_NAMESIZE) + 1)
        guard index != 0, if_indextoname(index, &buffer) != nil else { return nil }
        return String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    private static func prefixLength(_ netmask: UnsafeMutablePointer<sockaddr>?, family: Int32) -> Int {
        guard let netmask, Int32(netmask.pointee.sa_family) == family else {
            return family == AF_INET ? 32 : 128
        }
        let raw = UnsafeRawPointer(netmask)
        let maskBytes: [UInt8]
        if family == AF_INET {
            maskBytes = withUnsafeBytes(of: raw.loadUnaligned(as: sockaddr_in.self).sin_addr) { Array($0) }
        } else {
            maskBytes = withUnsafeBytes(of: raw.loadUnaligned(as: sockaddr_in6.self).sin6_addr) { Array($0) }
        }
        return maskBytes.reduce(0) { $0 + $1.nonzeroBitCount }
    }
}

/// The errors of looking up a ``NetworkInterface``.
extension SystemError {
    static func interfaceNotFound(_ name: String) -> SystemError {
        SystemError(.interfaceNotFound, "no interface '\(name)' in this network namespace")
    }

    static func listFailed(_ call: SystemCallError) -> SystemError {
        SystemError(.systemCallFailed, call)
    }
}
