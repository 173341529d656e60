// libFuzzer target for the control protocol's requests. Built by Fuzz/run.sh with -sanitize=fuzzer,address.
//
// The input is what clients write to the control socket. The daemon's `ControlConnection` takes the bytes before
// the first newline as a connection's request, and refuses it unread when it is longer than
// `ControlProtocol.maximumRequestBytes` (or when that many bytes come without a newline). That code sits among
// socket calls, so this target repeats its splitting and limit here, taking each line as the request of its own
// connection, and decodes each line as `ControlServer` does.
//
// Oracle: nothing traps; a decoded request re-encodes as one line that decodes to an equal request; every answer
// the daemon would give (the refusals, with the decoder's error in their message) encodes as one line that
// decodes to an equal response.
import Foundation
import SleepProxyControl

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzControlRequest(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let bytes = UnsafeBufferPointer(start: data, count: size)
    for line in requestLines(bytes) {
        guard let line else {
            answer(.requestTooLarge, "the request is longer than \(ControlProtocol.maximumRequestBytes) bytes")
            continue
        }
        let request: ControlRequest
        do {
            request = try ControlProtocol.decoder().decode(ControlRequest.self, from: Data(line))
        } catch {
            answer(.badRequest, "the request is not a valid control request: \(error)")
            continue
        }
        roundTrip(request)
        if request.version != ControlProtocol.version {
            answer(.unsupportedVersion, "protocol version \(request.version) is not supported")
        } else if !ControlRequest.Command.all.contains(request.command) {
            answer(.unknownCommand, "unknown command \"\(request.command)\"")
        }
    }
    return 0
}

/// The requests in `bytes`, one per newline-terminated line, as the daemon reads them: nil for a line over the
/// limit. Trailing bytes without a newline are no request (the client went away), unless they are over the limit
/// already.
func requestLines(_ bytes: UnsafeBufferPointer<UInt8>) -> [ArraySlice<UInt8>?] {
    var lines: [ArraySlice<UInt8>?] = []
    var rest = bytes[...]
    while let newline = rest.firstIndex(of: 0x0A) {
        let line = rest[..<newline]
        lines.append(line.count > ControlProtocol.maximumRequestBytes ? nil : ArraySlice(line))
        rest = rest[(newline + 1)...]
    }
    if rest.count > ControlProtocol.maximumRequestBytes { lines.append(nil) }
    return lines
}

/// Encodes `request` as the client does and decodes it back.
func roundTrip(_ request: ControlRequest) {
    let line: Data
    do {
        line = try ControlProtocol.line(request)
    } catch {
        fatalError("a decoded request does not encode: \(error)")
    }
    guard line.last == 0x0A, line.firstIndex(of: 0x0A) == line.count - 1 else {
        fatalError("a request encodes as more than one line")
    }
    guard let again = try? ControlProtocol.decoder().decode(ControlRequest.self, from: line), again == request else {
        fatalError("a request does not decode to itself: \(String(decoding: line, as: UTF8.self))")
    }
}

/// Encodes the refusal the daemon sends and decodes it as the client does.
func answer(_ code: ControlError.Code, _ message: String) {
    let response = ControlResponse.failure(ControlError(code, message))
    let line: Data
    do {
        line = try ControlProtocol.line(response)
    } catch {
        fatalError("an error response does not encode: \(error)")
    }
    guard line.firstIndex(of: 0x0A) == line.count - 1 else { fatalError("an error response spans lines") }
    guard let again = try? ControlProtocol.decoder().decode(ControlResponse.self, from: line), again == response
    else {
        fatalError("an error response does not decode to itself: \(String(decoding: line, as: UTF8.self))")
    }
}
