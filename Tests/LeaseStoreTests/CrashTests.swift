import DNSWire
import Foundation
import LeaseStore
import NetworkAddresses
import SleepProxyCore
import Testing

struct CrashTests {
    /// The helper executable, built beside this test binary because the test target depends on it.
    static func helperPath() throws -> String {
        let me = try FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")
        let path = URL(fileURLWithPath: me).deletingLastPathComponent().appendingPathComponent(
            "lease-store-crash-helper"
        ).path
        try #require(FileManager.default.isExecutableFile(atPath: path), "helper not built at \(path)")
        return path
    }

    @Test(
        "every batch reported committed survives SIGKILL of the writing process",
        arguments: [5, 37, 120])
    func killedWriterLosesNoCommittedBatch(killAfter: Int) throws {
        try withTemporaryDirectory { directory in
            let process = Process()
            process.executableURL = URL(fileURLWithPath: try Self.helperPath())
            process.arguments = [directory]
            let output = Pipe()
            let errors = Pipe()
            process.standardOutput = output
            process.standardError = errors
            try process.run()

            // Read until the helper has reported `killAfter` commits, then kill it wherever it is.
            var text = ""
            let reader = output.fileHandleForReading
            while text.split(separator: "\n").count < killAfter {
                let data = reader.availableData
                if data.isEmpty { break }
                text += String(decoding: data, as: UTF8.self)
            }
            kill(process.processIdentifier, SIGKILL)
            text += String(decoding: reader.readDataToEndOfFile(), as: UTF8.self)
            process.waitUntilExit()
            let stderr = String(decoding: errors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
            #expect(process.terminationReason == .uncaughtSignal, "helper exited by itself: \(stderr)")
            #expect(process.terminationStatus == SIGKILL)

            // Only whole lines count: the last one may have been cut by the kill.
            let committed = text.split(separator: "\n", omittingEmptySubsequences: true).compactMap { line in
                line.hasPrefix("committed ") ? Int(line.dropFirst("committed ".count)) : nil
            }
            try #require(committed.count >= killAfter)
            #expect(committed == Array(0..<committed.count))

            let store = try LeaseStore(directory: directory)
            let loaded = try store.loadOwners()
            #expect(loaded.problems == [])
            let byKey = Dictionary(uniqueKeysWithValues: loaded.owners.map { ($0.key, $0) })
            for k in committed {
                for j in 0..<8 {
                    let primary = MACAddress(
                        0x02, 0xCC, UInt8(truncatingIfNeeded: k >> 16), UInt8(truncatingIfNeeded: k >> 8),
                        UInt8(truncatingIfNeeded: k), UInt8(j))
                    let owner = byKey[OwnerKey(interface: "eth0", primaryMAC: primary)]
                    #expect(owner?.records.count == 25, "batch \(k) owner \(j)")
                    #expect(owner?.sequence == UInt8(k % 256))
                    #expect(owner?.records.first?.record.name.description == "crash-\(k)-\(j).local.")
                }
            }
            // Batches are whole: at most one more than reported (committed, killed before printing), all 8 owners.
            #expect(loaded.owners.count % 8 == 0)
            #expect(loaded.owners.count / 8 - committed.count <= 1)
            let events = try store.events(limit: 1_000_000).events
            #expect(events.count == loaded.owners.count / 8)
            #expect(events.map(\.event.detail) == (0..<events.count).map { "batch \($0)" })
        }
    }
}
