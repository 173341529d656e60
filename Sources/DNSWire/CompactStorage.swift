extension Array where Element == DNSRecord {
    /// The same records, equal byte for byte (case and all), with the names in them (owner names, PTR and SRV
    /// targets, NSEC next names) and their TXT bytes moved into one block of exactly their size, each distinct name
    /// once.
    ///
    /// Decoded records share the block their message was decompressed into, which is sized for the worst case and
    /// also holds the names of records not kept: records held for hours (a sleeping host's, a restored lease's)
    /// keep all of it alive. A host's names repeat (its host name is the target of every SRV and reverse mapping),
    /// so the block made here is usually smaller than the message's names were decompressed.
    public func withCompactStorage() -> [DNSRecord] {
        // Pass one: each distinct name and each TXT's bytes get a place in the new block; `slots` lists the place
        // of every name and TXT in the order pass two meets them. A host has a dozen or two distinct names, so a
        // name is looked for among them one by one (lengths first): cheaper than hashing each.
        var distinct: [DNSName] = []
        var places: [Int] = []
        // Past a few dozen distinct names (a large registration, up to hundreds), they are looked up by hash.
        var index: [DNSName: Int]?
        var texts: [(bytes: SharedBytes, offset: Int)] = []
        var slots: [Int] = []
        slots.reserveCapacity(count * 2)
        var size = 0
        func plan(_ name: DNSName) {
            let length = name.wireLength
            if let index {
                if let place = index[name] {
                    slots.append(place)
                    return
                }
            } else {
                for position in distinct.indices
                where distinct[position].wireLength == length && distinct[position] == name {
                    slots.append(places[position])
                    return
                }
            }
            distinct.append(name)
            places.append(size)
            slots.append(size)
            index?[name] = size
            if index == nil, distinct.count > 32 {
                index = Dictionary(uniqueKeysWithValues: zip(distinct, places))
            }
            size += length
        }
        for record in self {
            plan(record.name)
            switch record.rdata {
            case .ptr(let target): plan(target)
            case .srv(let srv): plan(srv.target)
            case .nsec(let nsec): plan(nsec.nextName)
            case .txt(let txt):
                texts.append((txt.bytes, size))
                slots.append(size)
                size += txt.bytes.count
            default: break
            }
        }
        let storage = NameStorage.make(capacity: size)
        storage.withUnsafeMutablePointerToElements { block in
            for (name, place) in zip(distinct, places) {
                name.withWire { wire in (block + place).update(from: wire.baseAddress!, count: wire.count) }
            }
            for text in texts where text.bytes.count > 0 {
                text.bytes.withUnsafeBufferPointer { bytes in
                    (block + text.offset).update(from: bytes.baseAddress!, count: bytes.count)
                }
            }
        }
        // Pass two: the records again, each name and TXT at its slot.
        var next = 0
        func moved(_ name: DNSName) -> DNSName {
            defer { next += 1 }
            return DNSName(storage: storage, start: slots[next], length: name.wireLength)
        }
        return map { record in
            var copy = record
            copy.name = moved(record.name)
            switch record.rdata {
            case .ptr(let target):
                copy.rdata = .ptr(moved(target))
            case .srv(var srv):
                srv.target = moved(srv.target)
                copy.rdata = .srv(srv)
            case .nsec(var nsec):
                nsec.nextName = moved(nsec.nextName)
                copy.rdata = .nsec(nsec)
            case .txt(let txt):
                copy.rdata = .txt(
                    TXTData(validatedRData: SharedBytes(storage: storage, start: slots[next], count: txt.bytes.count)))
                next += 1
            default:
                break
            }
            return copy
        }
    }
}
