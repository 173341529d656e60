// libFuzzer target for the config file parser. Built by Fuzz/run.sh with -sanitize=fuzzer,address.
//
// The input is the text of a config file (invalid UTF-8 is read with replacement characters, as the daemon reads
// the file).
//
// Oracle: parsing never traps; settings that parse are printed as `sleepproxyd --check-config` prints them, and
// that text parses to the same settings.
import SleepProxyDaemon

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzConfigFile(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let text = String(decoding: UnsafeBufferPointer(start: data, count: size), as: UTF8.self)
    let defaults = Settings()
    guard let settings = try? ConfigFile.parse(text, path: "fuzz.toml", onto: defaults) else { return 0 }
    let printed = settings.toml()
    let again: Settings
    do {
        again = try ConfigFile.parse(printed, path: "printed.toml", onto: defaults)
    } catch {
        fatalError("the printed settings do not parse: \(error)\n\(printed)")
    }
    guard again == settings else {
        fatalError("the printed settings parse to other settings:\n\(printed)\nprinted again:\n\(again.toml())")
    }
    return 0
}
