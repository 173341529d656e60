import Foundation

/// How many labs may run at once in this process: `SLEEPPROXY_LAB_CONCURRENCY`, or the number of cores.
///
/// Tests run in parallel, and each lab starts namespaces, daemons and helper processes whose waits have
/// deadlines of a few seconds. Two cores running twenty labs at once miss those deadlines; a small limit keeps
/// every lab's timing honest while unit tests still run in parallel.
actor LabSlots {
    static let shared = LabSlots(
        limit: ProcessInfo.processInfo.environment["SLEEPPROXY_LAB_CONCURRENCY"].flatMap { Int($0) }
            ?? max(1, ProcessInfo.processInfo.activeProcessorCount))

    private var available: Int
    private var waiting: [CheckedContinuation<Void, Never>] = []

    init(limit: Int) {
        available = max(1, limit)
    }

    func acquire() async {
        if available > 0 {
            available -= 1
            return
        }
        await withCheckedContinuation { waiting.append($0) }
    }

    func release() {
        if waiting.isEmpty {
            available += 1
        } else {
            waiting.removeFirst().resume()
        }
    }
}
