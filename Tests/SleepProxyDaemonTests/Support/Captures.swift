import CaptureStream
import Frames
import NetworkAddresses
import SleepProxyDaemon
import TestLab
import Testing

// What the lab tests see on a link: captures they open, and the way they show that something did not come.

/// What reaches `eth0` in `namespace` of Wake-on-LAN: frames of EtherType 0x0842 only.
func magicPackets(namespace: String) throws -> CaptureStream {
    let nic = try Lab.withNamespace(named: namespace) { try CaptureStream(interface: "eth0") }
    try nic.setFilter("ether proto 0x0842")
    return nic
}

/// What reaches `role`'s NIC of Wake-on-LAN (by default the sleeper's).
func magicPackets(_ lab: Lab, at role: Lab.Role = .sleeper) throws -> CaptureStream {
    try magicPackets(namespace: lab.host(role).namespace)
}

/// Waits for the next frame at `nic`, a capture of magic packets, which must wake the lab's sleeper.
@discardableResult
func expectMagicPacketForSleeper(
    _ lab: Lab, at nic: CaptureStream, within timeout: Duration = .seconds(10), _ what: String = "a magic packet"
) async throws -> CapturedFrame {
    let frame = try await firstElement(of: nic.frames, within: timeout, what) { _ in true }
    #expect(
        try EthernetFrame(parsing: frame.bytes).magicPacket?.target == MACAddress(lab.host(.sleeper).macString),
        "\(what): \(frame.bytes)")
    return frame
}

/// A frame sent on a watched link to show that its capture still works: from a MAC no lab host has, to another
/// no lab host has, so no host's kernel takes it. Each passes the filter of the captures it is meant for.
enum Marker {
    static let source = MACAddress(0x02, 0x77, 0, 0, 0, 0xEF)
    static let destination = MACAddress(0x02, 0x77, 0, 0, 0, 0xEE)

    /// For captures of magic packets (`ether proto 0x0842`): their EtherType, but text where the magic packet
    /// would be, so nothing reads it as one.
    static let wakeOnLAN: [UInt8] =
        destination.array + source.array + [0x08, 0x42] + Array("no magic packet here".utf8)
        + [UInt8](repeating: 0, count: 26)

    /// For captures of a UDP port (`udp port`, `udp dst port`): a datagram from and to `port` between two
    /// addresses no lab host has, carrying text that is no DNS message.
    static func udp(port: UInt16) -> [UInt8] {
        EthernetFrame.udp(
            UDPDatagram(sourcePort: port, destinationPort: port, payload: Array("no message here".utf8)),
            sourceAddress: IPv4Address(10, 77, 0, 249), destinationAddress: IPv4Address(10, 77, 0, 250),
            source: source, destination: destination
        ).serialized()
    }
}

/// The frames `capture` shows before `marker`, which is sent once `quiet` has passed on the same link (`eth0` in
/// `namespace`) through a handle of its own: the capture shows it as it leaves.
///
/// For a wait on something that must not come: what the test forbids must not be among the frames returned. A
/// capture that was closed or whose reading failed never shows the marker, and the wait for it throws, so an
/// answer without the forbidden frame always says that nothing came, never that nothing was seen. `marker` must
/// pass the capture's filter (see ``Marker``).
func framesBeforeMarker(
    _ capture: CaptureStream, _ marker: [UInt8], namespace: String, after quiet: Duration = .zero
) async throws -> [CapturedFrame] {
    try await Task.sleep(for: quiet)
    let sender = try Lab.withNamespace(named: namespace) { try CaptureStream(interface: "eth0") }
    defer { sender.close() }
    try sender.inject(marker)
    let seen = try await elements(of: capture.frames, within: .seconds(5), "the marker at \(namespace)") {
        $0.bytes.starts(with: marker)
    }
    return Array(seen.dropLast())
}

/// ``framesBeforeMarker(_:_:namespace:after:)`` on `role`'s NIC.
func framesBeforeMarker(
    _ capture: CaptureStream, _ marker: [UInt8], at role: Lab.Role, of lab: Lab, after quiet: Duration = .zero
) async throws -> [CapturedFrame] {
    try await framesBeforeMarker(capture, marker, namespace: lab.host(role).namespace, after: quiet)
}
