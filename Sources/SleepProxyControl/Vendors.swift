#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// Who made a network card, from the first three bytes of its MAC: the IEEE's list of MA-L assignments (OUIs), as
/// Debian's `ieee-data` package installs it.
public enum Vendors {
    /// Where `ieee-data` puts the list.
    public static let defaultList = "/usr/share/ieee-data/oui.txt"
    /// What a MAC with the locally administered bit set is: one the machine made up (a phone's private Wi-Fi
    /// address, a container's), not assigned to anyone.
    public static let locallyAdministered = "locally administered"

    /// The organisation of each of `macs` (`aa:bb:cc:dd:ee:ff`) that the list at `path` names, by MAC. Empty when the
    /// list is not installed; MACs it does not name are left out.
    public static func names(of macs: [String], list path: String = defaultList) -> [String: String] {
        var byPrefix: [String: [String]] = [:]
        var names: [String: String] = [:]
        for mac in macs {
            guard let prefix = prefix(of: mac) else { continue }
            if let first = UInt8(prefix.prefix(2), radix: 16), first & 0x02 != 0 {
                names[mac] = locallyAdministered
            } else {
                byPrefix[prefix, default: []].append(mac)
            }
        }
        guard !byPrefix.isEmpty, let data = FileManager.default.contents(atPath: path) else { return names }
        for (prefix, organisation) in organisations(in: data, wanted: Set(byPrefix.keys)) {
            for mac in byPrefix[prefix] ?? [] { names[mac] = organisation }
        }
        return names
    }

    /// `3C22FB` for `3c:22:fb:10:20:30` (or `3c-22-fb-...`), nil for what is not a MAC.
    static func prefix(of mac: String) -> String? {
        let digits = mac.filter(\.isHexDigit)
        guard digits.count == 12, mac.count == 17 else { return nil }
        return String(digits.prefix(6)).uppercased()
    }

    /// The organisations the list's `XXXXXX     (base 16)\t\tName` lines give for the prefixes in `wanted`.
    static func organisations(in list: Data, wanted: Set<String>) -> [String: String] {
        var found: [String: String] = [:]
        let marker = Array("(base 16)".utf8)
        list.withUnsafeBytes { (raw: UnsafeRawBufferPointer) in
            let bytes = raw.bindMemory(to: UInt8.self)
            var start = 0
            while start < bytes.count, found.count < wanted.count {
                var end = start
                while end < bytes.count, bytes[end] != 0x0A { end += 1 }
                defer { start = end + 1 }
                // Six hex digits, spaces, the marker, tabs, the name.
                guard end - start > 6 + marker.count, bytes[start + 6] == 0x20 else { continue }
                let prefix = String(decoding: UnsafeBufferPointer(rebasing: bytes[start..<start + 6]), as: UTF8.self)
                guard wanted.contains(prefix) else { continue }
                var cursor = start + 6
                while cursor < end, bytes[cursor] == 0x20 { cursor += 1 }
                guard end - cursor >= marker.count,
                    marker.indices.allSatisfy({ bytes[cursor + $0] == marker[$0] })
                else { continue }
                // The name, without the tabs before it and the spaces (or carriage return) after it.
                var first = cursor + marker.count
                var last = end
                while first < last, bytes[first] <= 0x20 { first += 1 }
                while last > first, bytes[last - 1] <= 0x20 { last -= 1 }
                guard first < last else { continue }
                found[prefix] = String(decoding: UnsafeBufferPointer(rebasing: bytes[first..<last]), as: UTF8.self)
            }
        }
        return found
    }
}
