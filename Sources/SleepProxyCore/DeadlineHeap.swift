/// Items by the time they are due, earliest first; items due at the same time come out in the order they were
/// pushed. A binary min-heap: pushing and taking the first cost O(log n), so that finding what is due among
/// thousands of waiting items never means a pass over all of them.
struct DeadlineHeap<Item: Sendable>: Sendable {
    private struct Entry: Sendable {
        var time: UnixTime
        var order: UInt64
        var item: Item

        func precedes(_ other: Entry) -> Bool {
            time < other.time || (time == other.time && order < other.order)
        }
    }

    private var heap: [Entry] = []
    private var pushed: UInt64 = 0

    var count: Int { heap.count }
    var isEmpty: Bool { heap.isEmpty }
    /// The earliest item and its time.
    var first: (time: UnixTime, item: Item)? { heap.first.map { ($0.time, $0.item) } }

    mutating func push(_ item: Item, at time: UnixTime) {
        pushed += 1
        heap.append(Entry(time: time, order: pushed, item: item))
        siftUp(heap.count - 1)
    }

    /// Takes out the earliest item.
    @discardableResult
    mutating func popFirst() -> (time: UnixTime, item: Item)? {
        guard let top = heap.first else { return nil }
        heap.swapAt(0, heap.count - 1)
        heap.removeLast()
        siftDown(0)
        return (top.time, top.item)
    }

    /// Takes out the items due by `now`, earliest first.
    mutating func popDue(by now: UnixTime) -> [Item] {
        var due: [Item] = []
        while let top = heap.first, top.time <= now {
            due.append(top.item)
            popFirst()
        }
        return due
    }

    /// Changes every item (in place) and gives it the time `change` returns, drops those `isGone` says went, and
    /// restores the order.
    mutating func update(
        _ change: (UnixTime, inout Item) -> UnixTime, dropping isGone: (UnixTime, Item) -> Bool = { _, _ in false }
    ) {
        for index in heap.indices {
            let time = heap[index].time
            heap[index].time = change(time, &heap[index].item)
        }
        heap.removeAll { isGone($0.time, $0.item) }
        for index in stride(from: heap.count / 2 - 1, through: 0, by: -1) { siftDown(index) }
    }

    mutating func removeAll() { heap.removeAll() }

    private mutating func siftUp(_ start: Int) {
        var child = start
        while child > 0 {
            let parent = (child - 1) / 2
            guard heap[child].precedes(heap[parent]) else { return }
            heap.swapAt(child, parent)
            child = parent
        }
    }

    private mutating func siftDown(_ start: Int) {
        var parent = start
        while true {
            let left = 2 * parent + 1
            let right = left + 1
            var first = parent
            if left < heap.count, heap[left].precedes(heap[first]) { first = left }
            if right < heap.count, heap[right].precedes(heap[first]) { first = right }
            guard first != parent else { return }
            heap.swapAt(parent, first)
            parent = first
        }
    }
}

/// One time per key (a lease expiry, a host's next step), and the keys ordered by it. A key given a new time
/// leaves its old entry in the heap, skipped when it reaches the top (lazy removal), and the heap is rebuilt when
/// such stale entries outnumber the live ones: every operation stays O(log n) with thousands of keys.
struct KeyedDeadlines<Key: Hashable & Sendable>: Sendable {
    private(set) var times: [Key: UnixTime] = [:]
    private var heap = DeadlineHeap<Key>()

    var count: Int { times.count }
    /// The earliest live entry.
    var first: (time: UnixTime, key: Key)? { heap.first.map { ($0.time, $0.item) } }

    subscript(key: Key) -> UnixTime? {
        get { times[key] }
        set {
            guard times[key] != newValue else { return }
            times[key] = newValue
            if let newValue { heap.push(key, at: newValue) }
            if heap.count > 4 * times.count + 64 { rebuild() }
            dropStale()
        }
    }

    /// Takes out the keys due by `now`, in the order of their times: they have no time any more.
    mutating func popDue(by now: UnixTime) -> [Key] {
        var due: [Key] = []
        while let top = heap.first, top.time <= now {
            heap.popFirst()
            if times[top.item] == top.time {
                times[top.item] = nil
                due.append(top.item)
            }
        }
        dropStale()
        return due
    }

    /// Sets every time from scratch.
    mutating func replaceAll(with times: [Key: UnixTime]) {
        self.times = times
        rebuild()
    }

    /// Moves every time by `change`.
    mutating func moveAll(_ change: (UnixTime) -> UnixTime) {
        replaceAll(with: times.mapValues(change))
    }

    private mutating func rebuild() {
        heap.removeAll()
        for (key, time) in times { heap.push(key, at: time) }
    }

    private mutating func dropStale() {
        while let top = heap.first, times[top.item] != top.time { heap.popFirst() }
    }
}
