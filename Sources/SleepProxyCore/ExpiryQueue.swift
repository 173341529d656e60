/// Owners by lease expiry, earliest first: a binary min-heap with lazy removal. An owner that changed or went
/// has its old entries skipped when they reach the top, so every operation stays O(log n) with thousands of
/// owners.
struct ExpiryQueue: Sendable {
    private struct Entry: Sendable {
        var time: UnixTime
        var key: OwnerKey
    }

    private var heap: [Entry] = []

    /// Schedules `key` at `time`. Entries for the same key at other times become stale and are dropped later.
    mutating func push(_ key: OwnerKey, at time: UnixTime) {
        heap.append(Entry(time: time, key: key))
        var child = heap.count - 1
        while child > 0 {
            let parent = (child - 1) / 2
            guard heap[child].time < heap[parent].time else { break }
            heap.swapAt(child, parent)
            child = parent
        }
    }

    /// The earliest entry, which may be stale.
    var first: (time: UnixTime, key: OwnerKey)? {
        heap.first.map { ($0.time, $0.key) }
    }

    mutating func popFirst() {
        guard !heap.isEmpty else { return }
        heap.swapAt(0, heap.count - 1)
        heap.removeLast()
        var parent = 0
        while true {
            let left = 2 * parent + 1
            let right = left + 1
            var smallest = parent
            if left < heap.count, heap[left].time < heap[smallest].time { smallest = left }
            if right < heap.count, heap[right].time < heap[smallest].time { smallest = right }
            guard smallest != parent else { return }
            heap.swapAt(parent, smallest)
            parent = smallest
        }
    }

    /// Drops stale entries from the top: those whose owner is gone or now expires at another time.
    mutating func dropStale(current: (OwnerKey) -> UnixTime?) {
        while let top = first, current(top.key) != top.time {
            popFirst()
        }
    }

    var count: Int { heap.count }

    /// Rebuilds from scratch when stale entries pile up (many renewals of the same owners).
    mutating func compact(current: [OwnerKey: UnixTime]) {
        heap = []
        for (key, time) in current { push(key, at: time) }
    }
}
