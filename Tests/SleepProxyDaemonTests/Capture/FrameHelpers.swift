import Frames
import NetworkAddresses

// Small bridges from the lab's byte arrays to the Frames types.

func mac(_ bytes: [UInt8]) -> MACAddress {
    guard let mac = MACAddress(bytes: bytes) else { preconditionFailure("not a MAC: \(bytes)") }
    return mac
}

func address(_ bytes: [UInt8]) -> IPv4Address {
    guard let address = IPv4Address(bytes: bytes) else { preconditionFailure("not an IPv4 address: \(bytes)") }
    return address
}

/// The ARP request in `frame`, if it is one.
func arpRequest(_ frame: [UInt8]) -> ARPPacket? {
    guard let arp = (try? EthernetFrame(parsing: frame))?.arp, arp.operation == .request else { return nil }
    return arp
}

/// The TCP segment in `frame` if it opens a connection (SYN without ACK).
func syn(_ frame: [UInt8]) -> TCPSegment? {
    guard let tcp = (try? EthernetFrame(parsing: frame))?.tcp, tcp.flags.contains(.syn), !tcp.flags.contains(.ack)
    else { return nil }
    return tcp
}

/// A Wake-on-LAN frame (EtherType 0x0842) from `source` waking `target`.
func magicFrame(from source: [UInt8], to target: [UInt8]) throws -> [UInt8] {
    try EthernetFrame.wakeOnLAN(MagicPacket(target: mac(target)), source: mac(source)).serialized()
}
