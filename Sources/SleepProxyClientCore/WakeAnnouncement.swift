public import DNSWire
public import NetworkAddresses

/// What a host sends when it is back: its records announced on mDNS with the OWNER option carrying the new
/// sequence number, as a Mac's announcements after a wake do (PROTOCOL.md section 2.11, item 1; the captured
/// `pub-mac-mdns-announce-with-owner-opt.hex`). A proxy that holds the host sees an OWNER whose sequence differs
/// from the registration's and lets go of it at once, silently.
///
/// Each message is an unsolicited response (ID 0, flags `84 00`) with records in the answer section, cache-flush
/// on the unique ones, and one OPT closing it: payload size 1440, TTL field 4500 as Apple writes it, the OWNER
/// option alone. Records that do not fit in 1,440 bytes of DNS data go on in further messages, each with the OPT.
public enum WakeAnnouncement {
    /// Of the records registered before the sleep, those still true of the interface's `addresses` now: an
    /// address record or reverse mapping of an address the host no longer has (a new DHCP lease, say) is not
    /// announced again.
    public static func records(_ registered: [DNSRecord], addresses: [IPAddress]) -> [DNSRecord] {
        let reverseNames = addresses.map(HostRecords.reverseName(of:))
        return registered.filter { record in
            if let address = record.address { return addresses.contains(address) }
            guard record.type == .ptr, record.name.isReverseMapping else { return true }
            return reverseNames.contains { $0.caseInsensitiveEquals(record.name) }
        }
    }

    public static func messages(records: [DNSRecord], owner: OwnerOption) throws(SleepRegistrationError) -> [[UInt8]] {
        let opt = DNSRecord.opt(
            EDNSHeader(udpPayloadSize: UInt16(SleepRegistration.normalMessageData), flags: 0x1194),
            options: [.owner(owner)])
        func encoded(_ records: [DNSRecord]) throws(SleepRegistrationError) -> [UInt8] {
            do {
                return try DNSMessage(
                    id: 0, flags: DNSFlags(response: true, opcode: .query, authoritative: true), answers: records,
                    additionals: [opt]
                ).encoded()
            } catch {
                throw SleepRegistrationError("cannot encode the announcement: \(error)")
            }
        }
        let limit = SleepRegistration.headerSize + SleepRegistration.normalMessageData
        var messages: [[UInt8]] = []
        var pending: [DNSRecord] = []
        var pendingBytes: [UInt8]?
        for record in records {
            let trial = try encoded(pending + [record])
            if trial.count <= limit || pending.isEmpty {
                pending.append(record)
                pendingBytes = trial
                continue
            }
            if let pendingBytes { messages.append(pendingBytes) }
            pending = [record]
            pendingBytes = try encoded(pending)
        }
        if let pendingBytes { messages.append(pendingBytes) }
        if messages.isEmpty { messages.append(try encoded([])) }
        return messages
    }
}
