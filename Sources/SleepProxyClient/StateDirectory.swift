import NetworkIO
import SleepProxyClientCore

#if canImport(Glibc)
    import Glibc
#endif

/// The client's state directory: `sequence`, the OWNER sequence number, and `registration-<interface>`, the
/// last registration made on each interface. Files are replaced whole (a temporary file renamed over them).
struct StateDirectory {
    let path: String

    /// Creates the directory if it is missing.
    func prepare() throws(ClientError) {
        if mkdir(path, 0o755) != 0, errno != EEXIST {
            throw ClientError(.state, "cannot create the state directory \(path): \(String(cString: strerror(errno)))")
        }
    }

    private var sequencePath: String { path + "/sequence" }

    /// The sequence number; a first run starts from a random one and saves it, so that a reinstalled host does
    /// not repeat the epoch a proxy may still hold.
    func sequence() throws(ClientError) -> SequenceNumber {
        switch readTextFile(sequencePath) {
        case .success(let text):
            do {
                return try SequenceNumber(fileText: text)
            } catch {
                throw ClientError(.state, "\(sequencePath): \(error); remove the file to start a new sequence")
            }
        case .failure(let error) where error.code == ENOENT:
            let first = SequenceNumber(UInt8.random(in: 0...255))
            try save(first)
            return first
        case .failure(let error):
            throw ClientError(.state, "cannot read \(sequencePath): \(error.reason)")
        }
    }

    /// The sequence number if it is kept and readable, without creating it: for `status`, which changes nothing
    /// (and may run as a user who cannot read the unit's state directory).
    func keptSequence() -> SequenceNumber? {
        guard case .success(let text) = readTextFile(sequencePath) else { return nil }
        return try? SequenceNumber(fileText: text)
    }

    func save(_ sequence: SequenceNumber) throws(ClientError) {
        try prepare()
        if let code = writeFileAtomically(sequencePath, sequence.fileText) {
            throw ClientError(.state, "cannot write \(sequencePath): \(String(cString: strerror(code)))")
        }
    }

    private func registrationPath(_ interface: String) -> String { path + "/registration-" + interface }

    /// The last registration on `interface`, if one is kept.
    func registration(on interface: String) throws(ClientError) -> SavedRegistration? {
        let file = registrationPath(interface)
        switch readTextFile(file) {
        case .success(let text):
            do {
                return try SavedRegistration(fileText: text)
            } catch {
                throw ClientError(.state, "\(file) does not read back: \(error)")
            }
        case .failure(let error) where error.code == ENOENT: return nil
        case .failure(let error):
            throw ClientError(.state, "cannot read \(file): \(error.reason)")
        }
    }

    func save(_ registration: SavedRegistration) throws(ClientError) {
        try prepare()
        let file = registrationPath(registration.interface)
        if let code = writeFileAtomically(file, registration.fileText) {
            throw ClientError(.state, "cannot write \(file): \(String(cString: strerror(code)))")
        }
    }

    func removeRegistration(on interface: String) {
        unlink(registrationPath(interface))
    }

    /// The interfaces with a kept registration.
    func registeredInterfaces() -> [String] {
        guard let directory = opendir(path) else { return [] }
        defer { closedir(directory) }
        var names: [String] = []
        while let entry = readdir(directory) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in
                String(cString: raw.bindMemory(to: CChar.self).baseAddress!)
            }
            if name.hasPrefix("registration-"), !name.hasSuffix(".new") {
                names.append(String(name.dropFirst("registration-".count)))
            }
        }
        return names.sorted()
    }
}
