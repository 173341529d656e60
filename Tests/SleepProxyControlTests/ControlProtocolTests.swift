import Foundation
import SleepProxyControl
import Testing

@Suite struct ControlProtocolTests {
    @Test func aRequestRoundTripsAsOneLine() throws {
        let request = ControlRequest(command: .events, host: "imac.local", limit: 5, follow: true)
        let line = try ControlProtocol.line(request)
        #expect(line.last == 0x0A)
        #expect(!line.dropLast().contains(0x0A))
        let decoded = try ControlProtocol.decoder().decode(ControlRequest.self, from: line)
        #expect(decoded == request)
    }
}
