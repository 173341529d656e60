/// Bytes that live in a `NameStorage` block, possibly shared with other values decoded from the same message.
/// The block is written once, before any value refers to it, and never again.
struct SharedBytes: @unchecked Sendable {
    let storage: NameStorage
    /// Narrow, so that the bytes take 16 bytes where they are held (TXT RDATA of every held service), not 24.
    private let offset: UInt32
    private let length: UInt32

    @inline(__always) var start: Int { Int(offset) }
    @inline(__always) var count: Int { Int(length) }

    init(storage: NameStorage, start: Int, count: Int) {
        self.storage = storage
        self.offset = UInt32(start)
        self.length = UInt32(count)
    }

    /// Copies `bytes` into a block of their own.
    init(copying bytes: some Collection<UInt8>) {
        let storage = NameStorage.make(capacity: bytes.count)
        storage.withUnsafeMutablePointerToElements { pointer in
            _ = UnsafeMutableBufferPointer(start: pointer, count: bytes.count).initialize(from: bytes)
        }
        self.init(storage: storage, start: 0, count: bytes.count)
    }

    @inline(__always)
    func withUnsafeBufferPointer<R>(_ body: (UnsafeBufferPointer<UInt8>) throws -> R) rethrows -> R {
        try storage.withUnsafeMutablePointerToElements { pointer in
            try body(UnsafeBufferPointer(start: pointer + start, count: count))
        }
    }

    var array: [UInt8] { withUnsafeBufferPointer { Array($0) } }
}

extension SharedBytes: Hashable {
    static func == (lhs: SharedBytes, rhs: SharedBytes) -> Bool {
        guard lhs.count == rhs.count else { return false }
        if lhs.storage === rhs.storage && lhs.start == rhs.start { return true }
        return lhs.withUnsafeBufferPointer { a in
            rhs.withUnsafeBufferPointer { b in
                a.count == 0 || memcmpEqual(a.baseAddress!, b.baseAddress!, a.count)
            }
        }
    }

    func hash(into hasher: inout Hasher) {
        withUnsafeBufferPointer { hasher.combine(bytes: UnsafeRawBufferPointer($0)) }
    }
}
