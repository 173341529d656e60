import NetworkIO
public import SleepProxyClientCore
import TOMLConfig

#if canImport(Glibc)
    import Glibc
#endif

/// What the sleep client does, from `/etc/sleepproxy/client.toml` and the command line. Every key is optional.
public struct ClientConfig: Sendable, Hashable {
    public static let defaultPath = "/etc/sleepproxy/client.toml"

    /// Interfaces to register on; empty: every wired Ethernet interface that is up and has an address.
    public var interfaces: [String] = []
    /// The lease asked for, in seconds (Macs ask for 7200).
    public var lease: UInt32 = 7_200
    /// Proxies to try before any other, best first: a proxy's whole instance label (`20-30-50-73.1 homeserver`)
    /// or the part after its numbers (`homeserver`), any case.
    public var prefer: [String] = []
    /// Proxies never to register with, named the same way.
    public var exclude: [String] = []
    public var wakeOnLAN: WakeOnLANHandling = .check
    /// Where the sequence number and the last registrations are kept.
    public var stateDirectory = "/var/lib/sleepproxy-client"
    /// How long `register` may take, in seconds, for every interface together and looking for proxies included:
    /// time for three proxies (three sendings a second apart each) after a listen of 2.5 s.
    public var timeout: UInt32 = 12

    public init() {}

    /// The keys the file may have.
    public static var keyNames: [String] { keys.keys.sorted() }

    /// The keys, with what each takes, for messages.
    static let keys: [String: String] = [
        "interfaces": "an array of interface names",
        "lease": "seconds from 60 to 86400",
        "prefer": "an array of proxy names",
        "exclude": "an array of proxy names",
        "wake_on_lan": "\"check\", \"enable\" or \"skip\"",
        "state_directory": "an absolute path",
        "timeout": "seconds from 2 to 30",
    ]

    /// The settings of the file at `path` on top of the defaults; a missing file is all defaults, unless
    /// `required` (a path given on the command line).
    public static func load(path: String, required: Bool) throws(ClientConfigError) -> ClientConfig {
        let text: String
        switch readTextFile(path) {
        case .success(let contents): text = contents
        case .failure(let error) where error.code == ENOENT && !required: return ClientConfig()
        case .failure(let error):
            throw ClientConfigError(file: path, "cannot read it: \(error.reason)")
        }
        return try parse(text, path: path)
    }

    /// The settings `text` describes.
    public static func parse(_ text: String, path: String) throws(ClientConfigError) -> ClientConfig {
        let table: [String: TOMLValue]
        do {
            table = try TOMLDocument.parse(text)
        } catch {
            throw ClientConfigError(file: path, line: error.line, error.message)
        }
        let lines = KeyLines(text)
        var config = ClientConfig()
        for key in table.keys.sorted() {
            guard let value = table[key] else { continue }
            func fail(_ message: String) -> ClientConfigError {
                ClientConfigError(file: path, line: lines.line(of: [key]), key: key, message)
            }
            guard let allowed = keys[key] else {
                throw fail("unknown key; the keys are \(keys.keys.sorted().joined(separator: ", "))")
            }
            func expected() -> ClientConfigError { fail("expected \(allowed), found \(value.summary)") }
            func names() throws(ClientConfigError) -> [String] {
                guard let array = value.array else { throw expected() }
                var names: [String] = []
                for element in array {
                    guard let name = element.string, !name.isEmpty else { throw expected() }
                    names.append(name)
                }
                return names
            }
            func seconds(_ range: ClosedRange<Int>) throws(ClientConfigError) -> UInt32 {
                guard let number = value.int, range.contains(number) else { throw expected() }
                return UInt32(number)
            }
            switch key {
            case "interfaces":
                config.interfaces = try names()
                if let bad = config.interfaces.first(where: { $0.utf8.count >= 16 || $0.contains("/") }) {
                    throw fail("\"\(bad)\" cannot be an interface name (at most 15 bytes, no slash)")
                }
            case "lease": config.lease = try seconds(60...86_400)
            case "prefer": config.prefer = try names()
            case "exclude": config.exclude = try names()
            case "wake_on_lan":
                guard let text = value.string, let handling = WakeOnLANHandling(text) else { throw expected() }
                config.wakeOnLAN = handling
            case "state_directory":
                guard let text = value.string, text.hasPrefix("/") else { throw expected() }
                config.stateDirectory = text
            case "timeout": config.timeout = try seconds(2...30)
            default: break
            }
        }
        return config
    }
}

/// A config problem: the file and line where known, the key, and what is allowed.
public struct ClientConfigError: Error, Hashable, Sendable, CustomStringConvertible {
    public var file: String
    public var line: Int?
    public var key: String?
    public var message: String

    public init(file: String, line: Int? = nil, key: String? = nil, _ message: String) {
        self.file = file
        self.line = line
        self.key = key
        self.message = message
    }

    public var description: String {
        (line.map { "\(file):\($0): " } ?? "\(file): ") + (key.map { "\($0): " } ?? "") + message
    }
}

/// Writes `text` to `path` whole or not at all: a temporary file beside it, flushed, then renamed over it.
func writeFileAtomically(_ path: String, _ text: String) -> Int32? {
    let temporary = path + ".new"
    let descriptor = open(temporary, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
    guard descriptor >= 0 else { return errno }
    let bytes = Array(text.utf8)
    var written = 0
    while written < bytes.count {
        let count = bytes[written...].withUnsafeBytes { write(descriptor, $0.baseAddress, $0.count) }
        if count < 0 {
            if errno == EINTR { continue }
            let code = errno
            close(descriptor)
            unlink(temporary)
            return code
        }
        written += count
    }
    if fsync(descriptor) != 0 {
        let code = errno
        close(descriptor)
        unlink(temporary)
        return code
    }
    close(descriptor)
    if rename(temporary, path) != 0 {
        let code = errno
        unlink(temporary)
        return code
    }
    return nil
}
