import ArgumentParser
import SleepProxyControl

@main
struct SleepProxyCtl: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "sleepproxyctl")
    func run() throws {}
}
