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
        // Where each distinct name goes in the new block, and where each TXT's bytes go, in order of appearance.
        var placed: [DNSName: Int] = [:]
        placed.reserveCapacity(count * 2)
        var order: [DNSName] = []
        var texts: [(bytes: SharedBytes, offset: Int)] = []
        var size = 0
        func plan(_ name: DNSName) {
            guard placed[name] == nil else { return }
            placed[name] = size
            order.append(name)
            size += name.wireLength
        }
        for record in self {
            plan(record.name)
            switch record.rdata {
            case .ptr(let target): plan(target)
            case .srv(let srv): plan(srv.target)
            case .nsec(let nsec): plan(nsec.nextName)
            case .txt(let txt):
                texts.append((txt.bytes, size))
                size += txt.bytes.count
            default: break
            }
        }
        let storage = NameStorage.make(capacity: size)
        storage.withUnsafeMutablePointerToElements { block in
            for name in order {
                name.withWire { wire in
                    (block + placed[name]!).update(from: wire.baseAddress!, count: wire.count)
                }
            }
            for text in texts where text.bytes.count > 0 {
                text.bytes.withUnsafeBufferPointer { bytes in
                    (block + text.offset).update(from: bytes.baseAddress!, count: bytes.count)
                }
            }
        }
        func moved(_ name: DNSName) -> DNSName {
            DNSName(storage: storage, start: placed[name]!, length: name.wireLength)
        }
        var nextText = 0
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
                let text = texts[nextText]
                nextText += 1
                copy.rdata = .txt(
                    TXTData(validatedRData: SharedBytes(storage: storage, start: text.offset, count: txt.bytes.count)))
            default:
                break
            }
            return copy
        }
    }
}
