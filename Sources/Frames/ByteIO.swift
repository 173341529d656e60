import NetworkAddresses

// Reading. Callers check the bounds first; the helpers only combine bytes.

@inline(__always)
func readU16(_ bytes: [UInt8], _ index: Int) -> UInt16 {
    UInt16(bytes[index]) << 8 | UInt16(bytes[index + 1])
}

@inline(__always)
func readU32(_ bytes: [UInt8], _ index: Int) -> UInt32 {
    UInt32(bytes[index]) << 24 | UInt32(bytes[index + 1]) << 16 | UInt32(bytes[index + 2]) << 8
        | UInt32(bytes[index + 3])
}

@inline(__always)
func readMAC(_ bytes: [UInt8], _ index: Int) -> MACAddress {
    MACAddress(
        bytes[index], bytes[index + 1], bytes[index + 2], bytes[index + 3], bytes[index + 4], bytes[index + 5])
}

@inline(__always)
func readIPv4(_ bytes: [UInt8], _ index: Int) -> IPv4Address {
    IPv4Address(value: readU32(bytes, index))
}

@inline(__always)
func readIPv6(_ bytes: [UInt8], _ index: Int) -> IPv6Address {
    let high = UInt64(readU32(bytes, index)) << 32 | UInt64(readU32(bytes, index + 4))
    let low = UInt64(readU32(bytes, index + 8)) << 32 | UInt64(readU32(bytes, index + 12))
    return IPv6Address(high: high, low: low)
}

/// Copies `bytes[start..<end]`; empty ranges do not allocate.
@inline(__always)
func copyBytes(_ bytes: [UInt8], _ start: Int, _ end: Int) -> [UInt8] {
    start < end ? Array(bytes[start..<end]) : []
}

// Writing. The same serialisation code feeds either an array or a running Internet checksum.

protocol ByteSink {
    mutating func write(_ byte: UInt8)
    mutating func write(_ bytes: [UInt8])
    mutating func writeZeros(_ count: Int)
}

extension ByteSink {
    /// Writes header options into `length` bytes: zero-padded when shorter, cut when longer.
    mutating func writeOptions(_ options: [UInt8], length: Int) {
        if options.count <= length {
            write(options)
            writeZeros(length - options.count)
        } else {
            write(Array(options.prefix(length)))
        }
    }

    @inline(__always)
    mutating func write(_ value: UInt16) {
        write(UInt8(truncatingIfNeeded: value >> 8))
        write(UInt8(truncatingIfNeeded: value))
    }

    @inline(__always)
    mutating func write(_ value: UInt32) {
        write(UInt16(truncatingIfNeeded: value >> 16))
        write(UInt16(truncatingIfNeeded: value))
    }

    @inline(__always)
    mutating func write(_ value: UInt64) {
        write(UInt32(truncatingIfNeeded: value >> 32))
        write(UInt32(truncatingIfNeeded: value))
    }

    @inline(__always)
    mutating func write(_ mac: MACAddress) {
        let b = mac.bytes
        write(b.0)
        write(b.1)
        write(b.2)
        write(b.3)
        write(b.4)
        write(b.5)
    }

    @inline(__always)
    mutating func write(_ address: IPv4Address) { write(address.value) }

    @inline(__always)
    mutating func write(_ address: IPv6Address) {
        write(address.high)
        write(address.low)
    }
}

struct ByteBuffer: ByteSink {
    var bytes: [UInt8] = []

    init(capacity: Int) { bytes.reserveCapacity(capacity) }

    @inline(__always)
    mutating func write(_ byte: UInt8) { bytes.append(byte) }

    mutating func write(_ other: [UInt8]) { bytes.append(contentsOf: other) }

    mutating func writeZeros(_ count: Int) {
        if count > 0 { bytes.append(contentsOf: repeatElement(0, count: count)) }
    }
}

/// The RFC 1071 Internet checksum, fed byte by byte or in runs; an odd byte is paired with the next run.
struct InternetChecksum: ByteSink {
    private var sum: UInt64 = 0
    private var odd = false

    @inline(__always)
    mutating func write(_ byte: UInt8) {
        sum &+= odd ? UInt64(byte) : UInt64(byte) << 8
        odd.toggle()
    }

    mutating func write(_ bytes: [UInt8]) {
        bytes.withUnsafeBufferPointer { buffer in
            var index = 0
            let count = buffer.count
            if odd, count > 0 {
                write(buffer[0])
                index = 1
            }
            var local: UInt64 = 0
            while index + 1 < count {
                local &+= UInt64(buffer[index]) << 8 | UInt64(buffer[index + 1])
                index += 2
            }
            sum &+= local
            if index < count { write(buffer[index]) }
        }
    }

    mutating func writeZeros(_ count: Int) {
        if count % 2 == 1 { odd.toggle() }
    }

    /// The folded 16-bit one's-complement sum (before the final complement).
    var folded: UInt16 {
        var value = sum
        while value > 0xFFFF { value = (value & 0xFFFF) + (value >> 16) }
        return UInt16(value)
    }

    /// The checksum to store: the complement of the folded sum.
    var checksum: UInt16 { ~folded }

    /// True when the data summed included a correct checksum field.
    var verifies: Bool { folded == 0xFFFF }
}

/// The fields of the IPv4 or IPv6 pseudo-header that transport checksums cover.
enum PseudoHeader {
    case ipv4(source: IPv4Address, destination: IPv4Address)
    case ipv6(source: IPv6Address, destination: IPv6Address)

    func start(protocol number: UInt8, length: Int) -> InternetChecksum {
        var sum = InternetChecksum()
        switch self {
        case .ipv4(let source, let destination):
            sum.write(source)
            sum.write(destination)
            sum.write(UInt8(0))
            sum.write(number)
            sum.write(UInt16(truncatingIfNeeded: length))
        case .ipv6(let source, let destination):
            sum.write(source)
            sum.write(destination)
            sum.write(UInt32(truncatingIfNeeded: length))
            sum.writeZeros(3)
            sum.write(number)
        }
        return sum
    }

    var isIPv4: Bool {
        if case .ipv4 = self { return true }
        return false
    }
}
