import ArgumentParser
import SleepProxyDaemon

@main
struct SleepProxyd: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "sleepproxyd",
        abstract: "Bonjour Sleep Proxy server: holds the mDNS records of sleeping hosts and wakes them on demand.",
        version: SleepProxyVersion.string
    )

    func run() throws {
        // The registration service, responder and capture arrive with the issues that build them; until then
        // the daemon only reports what it is.
        print("sleepproxyd \(SleepProxyVersion.string)")
    }
}
