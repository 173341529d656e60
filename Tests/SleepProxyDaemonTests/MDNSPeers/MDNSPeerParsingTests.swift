import TestLab
import Testing

/// The parsers behind the mDNS peer helpers, on output captured from avahi-browse 0.8 and dig 9.18; no lab needed.
struct MDNSPeerParsingTests {
    @Test func avahiBrowseLinesAreUnescapedAndTXTIsInWireOrder() throws {
        let output = #"""
            +;eth0;IPv6;Odd\059\032na\.me\\x\032\034q\034\032\195\169;_ssh._tcp;local
            =;eth0;IPv4;Odd\059\032na\.me\\x\032\034q\034\032\195\169;_ssh._tcp;local;hosta.local;10.77.0.2;2222;"flag" "c=\195\169" "b=\"q\";\\z" "a=1"
            -;eth0;IPv4;sleeper\032SSH;_ssh._tcp;local
            Failed to resolve service 'x' of type '_ssh._tcp' in domain 'local': Timeout reached
            =;eth0;IPv6;sleeper\032SSH;_ssh._tcp;local;sleeper.local;fe80::77:ff:fe00:2;22;
            """#
        let entries = AvahiBrowseEntry.parse(output)
        #expect(entries.count == 4)
        let added = try #require(entries.first)
        #expect(added.event == .added && added.ipVersion == .v6 && added.interface == "eth0")
        #expect(added.name == "Odd; na.me\\x \"q\" é")
        #expect(added.hostName == nil && added.port == nil && added.txt.isEmpty)

        let resolved = entries[1]
        #expect(resolved.event == .resolved && resolved.ipVersion == .v4)
        #expect(resolved.name == added.name && resolved.type == "_ssh._tcp" && resolved.domain == "local")
        #expect(resolved.hostName == "hosta.local" && resolved.address == "10.77.0.2" && resolved.port == 2222)
        #expect(resolved.txt == ["a=1", "b=\"q\";\\z", "c=é", "flag"])

        #expect(entries[2].event == .removed && entries[2].name == "sleeper SSH")
        #expect(entries[3].txt.isEmpty && entries[3].address == "fe80::77:ff:fe00:2")
    }

    @Test func digOutputWithAnAnswer() throws {
        let output = """

            ; <<>> DiG 9.18.49-1~deb12u3-Debian <<>> +norecurse +time=2 +tries=1 +qr -p 5353 @10.77.0.2 _ssh._tcp.local PTR
            ; (1 server found)
            ;; global options: +cmd
            ;; Sending:
            ;; WARNING: .local is reserved for Multicast DNS
            ;; You are currently testing what happens when an mDNS query is leaked to DNS
            ;; ->>HEADER<<- opcode: QUERY, status: NOERROR, id: 52038
            ;; flags: ad; QUERY: 1, ANSWER: 0, AUTHORITY: 0, ADDITIONAL: 1

            ;; OPT PSEUDOSECTION:
            ; EDNS: version: 0, flags:; udp: 1232
            ; COOKIE: 5eb9a3f7c4c9c165
            ;; QUESTION SECTION:
            ;_ssh._tcp.local.\t\tIN\tPTR

            ;; QUERY SIZE: 44

            ;; Got answer:
            ;; WARNING: .local is reserved for Multicast DNS
            ;; You are currently testing what happens when an mDNS query is leaked to DNS
            ;; ->>HEADER<<- opcode: QUERY, status: NOERROR, id: 52038
            ;; flags: qr aa; QUERY: 1, ANSWER: 3, AUTHORITY: 0, ADDITIONAL: 0

            ;; QUESTION SECTION:
            ;_ssh._tcp.local.\t\tIN\tPTR

            ;; ANSWER SECTION:
            _ssh._tcp.local.\t10\tIN\tPTR\tsleeper\\032SSH._ssh._tcp.local.
            sleeper\\032SSH._ssh._tcp.local.\t10 IN\tTXT\t"u=test" "a b"
            sleeper\\032SSH._ssh._tcp.local.\t10 IN\tSRV\t0 0 22 hosta.local.

            ;; Query time: 0 msec
            ;; SERVER: 10.77.0.2#5353(10.77.0.2) (UDP)
            ;; WHEN: Sun Nov 22 02:35:34 UTC 2026
            ;; MSG SIZE  rcvd: 148

            """
        let result = DigResult(command: CommandResult(status: 0, stdout: output, stderr: ""))
        let query = try #require(result.query)
        #expect(query.id == 52038 && query.flags == ["ad"] && query.hasEDNS && query.answers.isEmpty)
        #expect(query.questions == ["_ssh._tcp.local.\t\tIN\tPTR"])
        let response = try #require(result.response)
        #expect(result.answered && result.idMatched && result.status == "NOERROR")
        #expect(response.opcode == "QUERY" && response.flags == ["qr", "aa"] && !response.hasEDNS)
        #expect(
            result.answers == [
                DigRecord(
                    name: "_ssh._tcp.local.",
                    ttl: 10,
                    recordClass: "IN",
                    type: "PTR",
                    data: "sleeper\\032SSH._ssh._tcp.local."
                ),
                DigRecord(
                    name: "sleeper\\032SSH._ssh._tcp.local.",
                    ttl: 10,
                    recordClass: "IN",
                    type: "TXT",
                    data: #""u=test" "a b""#
                ),
                DigRecord(
                    name: "sleeper\\032SSH._ssh._tcp.local.",
                    ttl: 10,
                    recordClass: "IN",
                    type: "SRV",
                    data: "0 0 22 hosta.local."
                ),
            ]
        )
        #expect(result.additional.isEmpty && result.errors.isEmpty)
        #expect(result.warnings.first == "WARNING: .local is reserved for Multicast DNS")
    }

    @Test func digOutputWithoutAnAnswer() {
        let output = """
            ;; Sending:
            ;; ->>HEADER<<- opcode: QUERY, status: NOERROR, id: 15331
            ;; flags: ad; QUERY: 1, ANSWER: 0, AUTHORITY: 0, ADDITIONAL: 1

            ;; QUESTION SECTION:
            ;nobody.local.\t\t\tIN\tA

            ;; QUERY SIZE: 54

            ;; communications error to 10.77.0.2#5353: timed out
            ;; no servers could be reached

            """
        let result = DigResult(command: CommandResult(status: 9, stdout: output, stderr: ""))
        #expect(result.query?.id == 15331)
        #expect(!result.answered && !result.idMatched && result.status == nil && result.answers.isEmpty)
        #expect(result.errors == ["communications error to 10.77.0.2#5353: timed out", "no servers could be reached"])
    }

    @Test func mdnsQueryMessages() throws {
        let message = try Lab.mdnsQuery(name: "sleeper.local", type: "A", unicastResponse: true, id: 0x1234)
        #expect(
            message == [0x12, 0x34, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0]
                + [7] + Array("sleeper".utf8) + [5] + Array("local".utf8) + [0]
                + [0, 1, 0x80, 1]
        )
        // Escaped dots and decimal escapes stay inside a label, as in sleep-proxy instance names.
        let escaped = try Lab.mdnsQuery(name: #"70-35-60-63\.1\032x._srv.local."#, type: "SRV", unicastResponse: false)
        #expect(
            escaped[12...]
                == ([15] + Array("70-35-60-63.1 x".utf8) + [4] + Array("_srv".utf8) + [5] + Array("local".utf8) + [0]
                + [0, 33, 0, 1])[...]
        )
        #expect(try Lab.mdnsQuery(name: "a", type: "TYPE65", unicastResponse: false).suffix(4) == [0, 65, 0, 1])
        #expect(throws: LabError.self) { try Lab.mdnsQuery(name: "a..b", type: "A", unicastResponse: false) }
        #expect(throws: LabError.self) { try Lab.mdnsQuery(name: "a", type: "NOPE", unicastResponse: false) }
    }

    @Test func mdnsQueryResponseHeader() {
        let bytes: [UInt8] = [0x12, 0x34, 0x84, 0x00, 0, 1, 0, 2, 0, 0, 0, 3, 10, 77, 0, 2]
        let response = MDNSQueryResponse(source: "10.77.0.2", sourcePort: 5353, destination: "10.77.0.3", bytes: bytes)
        #expect(response.id == 0x1234 && response.flags == 0x8400)
        #expect(response.questionCount == 1 && response.answerCount == 2 && response.additionalCount == 3)
        #expect(!response.isMulticast)
        #expect(response.contains([10, 77, 0, 2]) && !response.contains([10, 77, 0, 3]))
    }
}
