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

    private var entries: [[UInt8]: Entry] = [:]
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
        entries[bytes, default: Entry(pending: 0, sentAt: now)].pending += 1
        entries[bytes]?.sentAt = now
        oldest = min(oldest, now)
    }

    /// Whether `bytes` is a message we sent and the capture had not returned yet; claims it.
    mutating func claim(_ bytes: [UInt8]) -> Bool {
        guard var entry = entries[bytes] else { return false }
        entry.pending -= 1
        entries[bytes] = entry.pending > 0 ? entry : nil
        return true
    }
}
