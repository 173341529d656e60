/// A domain name as a sequence of labels, each any bytes (1 to 63 of them), with case preserved.
///
/// Instance names such as `70-35-60-63.1 Apple TV` hold dots and spaces inside one label; nothing here treats a
/// dot inside a label as a separator. Equality and hashing are exact (byte for byte, case included), so a decoded
/// message compares equal to the original only when every name kept its case. Use `caseInsensitiveEquals(_:)` or
/// `lowercased()` for DNS name comparison, which ignores ASCII case only (RFC 4343).
// Sendable: the bytes a name refers to are written once, before any name refers to them, and never again.
public struct DNSName: @unchecked Sendable {
    /// Where the uncompressed wire form lives: length-prefixed labels ending with the zero-length root label.
    /// Names decoded from one message share one storage block; a name never changes the bytes it refers to.
    let storage: NameStorage
    /// Where the wire form starts in the storage, and its length (at most 255 bytes): kept narrow so that a name
    /// takes 16 bytes in the records that hold it, not 24 (a quarter of a million held records have two each).
    private let offset: UInt32
    private let length: UInt8

    /// Where the wire form starts in the storage.
    @inline(__always) var start: Int { Int(offset) }
    /// The length of the wire form, including the root label.
    @inline(__always) public var wireLength: Int { Int(length) }

    /// The root name `.`.
    public static let root = DNSName(uncheckedWire: [0])

    /// A name over `length` bytes of `storage` from `start`; the length is at most 255 (a name's limit, which
    /// every builder checks before this).
    init(storage: NameStorage, start: Int, length: Int) {
        self.storage = storage
        self.offset = UInt32(start)
        self.length = UInt8(length)
    }

    init(uncheckedWire: some Collection<UInt8>) {
        let storage = NameStorage.make(capacity: uncheckedWire.count)
        storage.withUnsafeMutablePointerToElements { pointer in
            _ = UnsafeMutableBufferPointer(start: pointer, count: uncheckedWire.count).initialize(from: uncheckedWire)
        }
        self.init(storage: storage, start: 0, length: uncheckedWire.count)
    }

    /// Calls `body` with the wire form.
    @inline(__always)
    public func withWire<R>(_ body: (UnsafeBufferPointer<UInt8>) throws -> R) rethrows -> R {
        try storage.withUnsafeMutablePointerToElements { pointer in
            try body(UnsafeBufferPointer(start: pointer + start, count: wireLength))
        }
    }

    /// The uncompressed wire form: length-prefixed labels ending with the zero-length root label.
    public var wire: [UInt8] { withWire { Array($0) } }

    /// Builds a name from its labels (most specific first), each given as bytes.
    public init(labels: some Sequence<some Collection<UInt8>>) throws(DNSWireError) {
        var out: [UInt8] = []
        out.reserveCapacity(32)
        for label in labels {
            guard !label.isEmpty else {
                throw DNSWireError(.badLabelType, field: "name", offset: -1, expected: "no empty label before the root")
            }
            guard label.count <= 63 else {
                throw DNSWireError(
                    .labelTooLong, field: "name", offset: -1,
                    expected: "a label of at most 63 bytes, not \(label.count)")
            }
            out.append(UInt8(label.count))
            out.append(contentsOf: label)
        }
        out.append(0)
        guard out.count <= 255 else {
            throw DNSWireError(
                .nameTooLong, field: "name", offset: -1, expected: "at most 255 bytes in wire form, not \(out.count)")
        }
        self.init(uncheckedWire: out)
    }

    /// Builds a name from labels given as strings (UTF-8), most specific first: `["fanboy", "local"]`.
    public init(labels: [String]) throws(DNSWireError) {
        try self.init(labels: labels.map { Array($0.utf8) })
    }

    /// Parses presentation form: labels separated by `.`, with `\.` for a dot inside a label, `\\` for a
    /// backslash and `\DDD` for any byte. A trailing dot is optional; `.` alone is the root.
    public init(_ text: String) throws(DNSWireError) {
        if text == "." || text.isEmpty {
            self = .root
            return
        }
        var labels: [[UInt8]] = []
        var current: [UInt8] = []
        let bytes = Array(text.utf8)
        var i = 0
        while i < bytes.count {
            let byte = bytes[i]
            if byte == UInt8(ascii: "\\") {
                guard i + 1 < bytes.count else {
                    throw DNSWireError(.badRData, field: "name text", offset: i, expected: "a character after \\")
                }
                let next = bytes[i + 1]
                if (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(next) {
                    guard i + 4 <= bytes.count else {
                        throw DNSWireError(
                            .badRData, field: "name text", offset: i, expected: "\\DDD with three digits")
                    }
                    let digits = bytes[(i + 1)...(i + 3)]
                    guard digits.allSatisfy({ (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) }) else {
                        throw DNSWireError(
                            .badRData, field: "name text", offset: i, expected: "\\DDD with three digits")
                    }
                    let value = digits.reduce(0) { $0 * 10 + Int($1 - UInt8(ascii: "0")) }
                    guard value <= 255 else {
                        throw DNSWireError(.badRData, field: "name text", offset: i, expected: "\\DDD of at most 255")
                    }
                    current.append(UInt8(value))
                    i += 4
                } else {
                    current.append(next)
                    i += 2
                }
            } else if byte == UInt8(ascii: ".") {
                guard !current.isEmpty else {
                    throw DNSWireError(.badLabelType, field: "name text", offset: i, expected: "no empty label")
                }
                labels.append(current)
                current = []
                i += 1
            } else {
                current.append(byte)
                i += 1
            }
        }
        if !current.isEmpty { labels.append(current) }
        try self.init(labels: labels)
    }

    /// The labels, most specific first, as byte arrays (the root label is not included).
    public var labels: [[UInt8]] {
        withWire { wire in
            var result: [[UInt8]] = []
            var i = 0
            while wire[i] != 0 {
                let length = Int(wire[i])
                result.append(Array(wire[(i + 1)...(i + length)]))
                i += length + 1
            }
            return result
        }
    }

    /// The number of labels, not counting the root.
    public var labelCount: Int {
        withWire { wire in
            var count = 0
            var i = 0
            while wire[i] != 0 {
                count += 1
                i += Int(wire[i]) + 1
            }
            return count
        }
    }

    public var isRoot: Bool { wireLength == 1 }

    /// The label at `index` (0 = the most specific) as bytes, or nil past the end.
    public func label(at index: Int) -> [UInt8]? {
        withWire { wire in
            var i = 0
            var n = 0
            while wire[i] != 0 {
                let length = Int(wire[i])
                if n == index { return Array(wire[(i + 1)...(i + length)]) }
                n += 1
                i += length + 1
            }
            return nil
        }
    }

    /// The name without its first `count` labels (`fanboy._ssh._tcp.local` dropping 1 is `_ssh._tcp.local`).
    public func droppingFirstLabels(_ count: Int) -> DNSName {
        let skipped = withWire { wire in
            var i = 0
            var n = 0
            while n < count, wire[i] != 0 {
                i += Int(wire[i]) + 1
                n += 1
            }
            return i
        }
        return DNSName(storage: storage, start: start + skipped, length: wireLength - skipped)
    }

    /// True when the labels equal `other`'s ignoring ASCII case.
    public func caseInsensitiveEquals(_ other: DNSName) -> Bool {
        guard wireLength == other.wireLength else { return false }
        return withWire { a in
            other.withWire { b in
                for i in 0..<a.count where asciiLower(a[i]) != asciiLower(b[i]) {
                    return false
                }
                return true
            }
        }
    }

    /// True when this name ends with `suffix`, comparing labels ignoring ASCII case.
    public func hasSuffix(_ suffix: DNSName) -> Bool {
        let offset = wireLength - suffix.wireLength
        guard offset >= 0 else { return false }
        return withWire { wire in
            // The suffix must start on a label boundary.
            var i = 0
            while i < offset { i += Int(wire[i]) + 1 }
            guard i == offset else { return false }
            return suffix.withWire { s in
                for k in 0..<s.count where asciiLower(wire[offset + k]) != asciiLower(s[k]) {
                    return false
                }
                return true
            }
        }
    }

    /// Feeds the name to `hasher` with ASCII letters folded to lower case, as `lowercased().hash(into:)` would,
    /// without building the lower-case name: names that `caseInsensitiveEquals` calls equal hash alike.
    public func hashIgnoringCase(into hasher: inout Hasher) {
        withWire { wire in
            withUnsafeTemporaryAllocation(of: UInt8.self, capacity: wire.count) { folded in
                for index in wire.indices { folded[index] = asciiLower(wire[index]) }
                hasher.combine(bytes: UnsafeRawBufferPointer(folded))
            }
        }
    }

    /// The name in storage of its own, for a name kept long after the message it was decoded from: a decoded
    /// name shares its message's names block (half a kilobyte at least), and would keep all of it alive. A name
    /// that already has its storage to itself is returned as it is.
    public func compacted() -> DNSName {
        guard start != 0 || storage.capacity > wireLength + Self.compactSlack else { return self }
        return withWire { DNSName(uncheckedWire: $0) }
    }

    /// What a name's own storage may hold beyond its bytes (the allocator rounds a block up).
    static let compactSlack = 32

    /// Bytes of the storage this name keeps alive: its own bytes, or its whole message's names block.
    var storageCapacity: Int { storage.capacity }

    /// The name with ASCII letters folded to lower case (length bytes are below 64 and never letters). A name with
    /// no upper-case letter is returned as it is, sharing its storage.
    public func lowercased() -> DNSName {
        withWire { wire in
            guard wire.contains(where: { asciiLower($0) != $0 }) else { return self }
            let storage = NameStorage.make(capacity: wire.count)
            storage.withUnsafeMutablePointerToElements { pointer in
                for index in wire.indices { pointer[index] = asciiLower(wire[index]) }
            }
            return DNSName(storage: storage, start: 0, length: wire.count)
        }
    }
}

extension DNSName: Hashable {
    /// Exact equality: the same bytes, case included.
    public static func == (lhs: DNSName, rhs: DNSName) -> Bool {
        guard lhs.wireLength == rhs.wireLength else { return false }
        if lhs.storage === rhs.storage && lhs.start == rhs.start { return true }
        return lhs.withWire { a in
            rhs.withWire { b in
                memcmpEqual(a.baseAddress!, b.baseAddress!, a.count)
            }
        }
    }

    public func hash(into hasher: inout Hasher) {
        withWire { hasher.combine(bytes: UnsafeRawBufferPointer($0)) }
    }
}

@inline(__always)
func memcmpEqual(_ a: UnsafePointer<UInt8>, _ b: UnsafePointer<UInt8>, _ count: Int) -> Bool {
    for i in 0..<count where a[i] != b[i] {
        return false
    }
    return true
}

/// A block of bytes holding the wire form of one or more names.
final class NameStorage: ManagedBuffer<Int, UInt8> {
    static func make(capacity: Int) -> NameStorage {
        unsafeDowncast(NameStorage.create(minimumCapacity: max(capacity, 1)) { _ in 0 }, to: NameStorage.self)
    }
}

@inline(__always)
func asciiLower(_ byte: UInt8) -> UInt8 {
    byte &- 0x41 < 26 ? byte | 0x20 : byte
}

extension DNSName: CustomStringConvertible {
    /// Presentation form with a trailing dot. `.` and `\` inside labels are escaped; valid UTF-8 is kept as
    /// text, and control bytes or invalid UTF-8 are written `\DDD`.
    public var description: String {
        if isRoot { return "." }
        var out = ""
        for label in labels {
            let printable = label.allSatisfy { $0 >= 0x20 && $0 != 0x7F }
            if printable, let text = String(validating: label, as: UTF8.self) {
                for character in text {
                    if character == "." || character == "\\" { out.append("\\") }
                    out.append(character)
                }
            } else {
                for byte in label {
                    switch byte {
                    case UInt8(ascii: "."), UInt8(ascii: "\\"):
                        out.append("\\")
                        out.append(Character(Unicode.Scalar(byte)))
                    case 0x20...0x7E:
                        out.append(Character(Unicode.Scalar(byte)))
                    default:
                        let digits = String(byte)
                        out.append("\\" + String(repeating: "0", count: 3 - digits.count) + digits)
                    }
                }
            }
            out.append(".")
        }
        return out
    }
}

extension DNSName: ExpressibleByStringLiteral {
    /// A name from a literal in presentation form; traps on an invalid literal (a programming error).
    public init(stringLiteral value: String) {
        do {
            try self.init(value)
        } catch {
            preconditionFailure("invalid DNS name literal \(value): \(error)")
        }
    }
}
