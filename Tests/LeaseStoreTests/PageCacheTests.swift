import Foundation
import LeaseStore
import SleepProxyCore
import Testing

struct PageCacheTests {
    /// The size of the store's files: the database and its write-ahead log.
    static func fileBytes(_ directory: String) throws -> Int {
        try [LeaseStore.fileName, LeaseStore.fileName + "-wal"].reduce(0) { total, name in
            let attributes = try FileManager.default.attributesOfItem(atPath: directory + "/" + name)
            return total + ((attributes[.size] as? NSNumber)?.intValue ?? 0)
        }
    }

    @Test("the page cache stays within its limit while commits go on and the file grows far past it")
    func cacheStaysWithinItsLimit() throws {
        try withTemporaryDirectory { directory in
            let limitKiB = 128
            let store = try LeaseStore(
                directory: directory, configuration: .init(eventHistoryLimit: 2_000, pageCacheKiB: limitKiB))
            let records = held(try macRecords())
            var largest = 0
            // Hosts registering and renewing, with an event each: 400 owners saved again and again.
            for round in 0..<60 {
                let changes = (0..<40).flatMap { n -> [StoreChange] in
                    let host = (round * 40 + n) % 400
                    return [
                        .saveOwner(makeOwner(primary: mac(UInt8(host % 256), UInt8(host / 256)), records: records)),
                        .appendEvent(makeEvent(round * 40 + n)),
                    ]
                }
                try store.apply(changes)
                largest = max(largest, try store.cachedPageBytes())
            }
            let file = try Self.fileBytes(directory)
            #expect(file > 8 * limitKiB * 1024, "the file (\(file) bytes) should be far larger than the cache")
            #expect(largest > limitKiB * 1024 / 2, "the cache should be in use: \(largest) bytes at most")
            // Each cached page carries a header of its own (about 10 %) on top of its 4 KiB.
            #expect(
                largest <= limitKiB * 1024 * 5 / 4, "the cache held \(largest) bytes for a limit of \(limitKiB) KiB")
        }
    }
}
