import Dispatch

/// The mDNS messages the daemon sent lately, so that the capture (which sees everything leaving this host) can
/// tell them from the messages other programs on this host send: those are answered like anyone's, ours are not.
///
/// A message is recognised by its bytes; each sending is claimed once. Entries a capture never returned (a full
/// buffer, a filter change) are dropped after a few seconds.
struct OwnTransmissions {
    private struct Entry {
        var pending: Int
        var sentAt: UInt64
    }

    /// A message's bytes as a key hashed in one pass over the buffer: `[UInt8]`'s own hashing feeds the hasher one
    /// byte at a time, which made the key of every announcement a few percent of what a registration cost.
    private struct Key: Hashable {
        var bytes: [UInt8]

        func hash(into hasher: inout Hasher) {
            bytes.withUnsafeBytes { hasher.combine(bytes: $0) }
        }
    }

    private var entries: [Key: Entry] = [:]
    private var oldest: UInt64 = .max
    static let lifetime: UInt64 = 5_000_000_000
    static let capacity = 4_096

    mutating func note(_ bytes: [UInt8]) {
        let now = DispatchTime.now().uptimeNanoseconds
        if entries.count >= Self.capacity || (oldest != .max && now - oldest > Self.lifetime) {
            entries = entries.filter { now - $0.value.sentAt <= Self.lifetime }
            if entries.count >= Self.capacity { entries.removeAll() }
            oldest = entries.values.map(\.sentAt).min() ?? .max
        }
        let key = Key(bytes: bytes)
        entries[key, default: Entry(pending: 0, sentAt: now)].pending += 1
        entries[key]?.sentAt = now
        oldest = min(oldest, now)
    }

    /// Whether `bytes` is a message we sent and the capture had not returned yet; claims it.
    mutating func claim(_ bytes: [UInt8]) -> Bool {
        let key = Key(bytes: bytes)
        guard var entry = entries[key] else { return false }
        entry.pending -= 1
        entries[key] = entry.pending > 0 ? entry : nil
        return true
    }
}
