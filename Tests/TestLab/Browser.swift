import Foundation

/// One step of a headless browser's visit (``Lab/browse(from:_:timeout:)``).
public enum BrowserStep: Sendable {
    /// Opens `url` and waits for its load event.
    case navigate(String)
    /// Evaluates JavaScript in the page and gives back its value as JSON text.
    case evaluate(String)
    /// Evaluates `expression` every 100 ms until it is true (a truthy value), up to `seconds`; fails otherwise,
    /// saying what it last was.
    case waitFor(String, seconds: Double)
    /// Saves a PNG of the viewport (the whole page when `fullPage`) at `path`.
    case screenshot(path: String, fullPage: Bool)
    /// Sets the viewport: `width` × `height` CSS pixels, a phone's when `mobile`.
    case viewport(width: Int, height: Int, mobile: Bool)
    /// Emulates `prefers-color-scheme: dark` (or light).
    case darkMode(Bool)
    /// Turns JavaScript off for the pages opened from now on.
    case scriptsOff
    /// Creates the file at `path`: tells the test that the visit got this far.
    case touch(String)
    /// Waits up to `seconds` until the file at `path` exists: the test says when the visit may go on.
    case waitForFile(String, seconds: Double)

    var json: [String: Any] {
        switch self {
        case .navigate(let url): ["do": "navigate", "url": url]
        case .evaluate(let expression): ["do": "evaluate", "expression": expression]
        case .waitFor(let expression, let seconds): ["do": "waitFor", "expression": expression, "seconds": seconds]
        case .screenshot(let path, let fullPage): ["do": "screenshot", "path": path, "fullPage": fullPage]
        case .viewport(let width, let height, let mobile):
            ["do": "viewport", "width": width, "height": height, "mobile": mobile]
        case .darkMode(let dark): ["do": "darkMode", "dark": dark]
        case .scriptsOff: ["do": "scriptsOff"]
        case .touch(let path): ["do": "touch", "path": path]
        case .waitForFile(let path, let seconds): ["do": "waitForFile", "path": path, "seconds": seconds]
        }
    }
}

extension Lab {
    /// The browser the lab drives: Debian's `chromium`.
    public static let browser = "chromium"

    /// Runs Debian's Chromium, headless, in `role`'s namespace (so that it reaches the lab's hosts as a browser on
    /// the LAN does), through `steps`, driving it over the DevTools protocol on a pipe. Returns each step's value
    /// (JSON text for `evaluate` and `waitFor`, nil for the others); throws when a step fails, with the browser's
    /// own words. Chromium runs as root here, hence `--no-sandbox`.
    public func browse(from role: Role, _ steps: [BrowserStep], timeout: Duration = .seconds(90)) async throws
        -> [String?]
    {
        let profile = workDirectory + "/browser-profile-\(UUID().uuidString.prefix(8))"
        let plan = try JSONSerialization.data(withJSONObject: steps.map(\.json))
        let planPath = profile + ".json"
        try plan.write(to: URL(fileURLWithPath: planPath))
        let result = try await run(
            role, ["python3", "-c", Self.browserDriver, Self.browser, profile, planPath], timeout: timeout)
        guard result.succeeded, let line = result.stdout.split(separator: "\n").last(where: { $0.hasPrefix("[") }),
            let values = try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [Any]
        else {
            throw LabError(
                "the browser in \(role.rawValue) failed: \(result.stdout.suffix(2_000)) \(result.stderr.suffix(3_000))")
        }
        return values.map { $0 as? String }
    }

    /// Starts Chromium with `--remote-debugging-pipe` (commands on its fd 3, answers and events on its fd 4,
    /// each a JSON message ending in a NUL), opens one page, and carries out the plan. Prints the values as one
    /// JSON array on the last line.
    static let browserDriver = #"""
        import base64, json, os, subprocess, sys, time
        browser, profile, plan_path = sys.argv[1], sys.argv[2], sys.argv[3]
        plan = json.load(open(plan_path))
        to_browser_r, to_browser_w = os.pipe()
        from_browser_r, from_browser_w = os.pipe()
        # Out of the way of 3 and 4, which the browser's ends take in the child.
        child_in, child_out = 40, 41
        os.dup2(to_browser_r, child_in)
        os.dup2(from_browser_w, child_out)
        def hand_over():
            os.dup2(child_in, 3)
            os.dup2(child_out, 4)
            os.close(child_in)
            os.close(child_out)
        log = open(profile + ".log", "wb")
        process = subprocess.Popen(
            [browser, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--no-default-browser-check",
             "--disable-extensions", "--disable-background-networking", "--disable-sync", "--remote-debugging-pipe",
             "--user-data-dir=" + profile, "--window-size=1280,900", "about:blank"],
            preexec_fn=hand_over, close_fds=False, stdout=subprocess.DEVNULL, stderr=log)
        for fd in (to_browser_r, from_browser_w, child_in, child_out):
            os.close(fd)
        buffer = b""
        events = []
        next_id = [0]
        def message():
            global buffer
            while b"\0" not in buffer:
                chunk = os.read(from_browser_r, 1 << 16)
                if not chunk:
                    raise SystemExit("the browser closed its pipe: " + open(profile + ".log", errors="replace").read()[-2000:])
                buffer += chunk
            raw, buffer = buffer.split(b"\0", 1)
            return json.loads(raw)
        def call(method, params=None, session=None):
            next_id[0] += 1
            request = {"id": next_id[0], "method": method, "params": params or {}}
            if session:
                request["sessionId"] = session
            os.write(to_browser_w, json.dumps(request).encode() + b"\0")
            while True:
                answer = message()
                if answer.get("id") == next_id[0]:
                    if "error" in answer:
                        raise SystemExit("%s: %s" % (method, answer["error"]))
                    return answer.get("result", {})
                events.append(answer)
        def wait_event(name, seconds):
            deadline = time.time() + seconds
            while time.time() < deadline:
                for index, event in enumerate(events):
                    if event.get("method") == name:
                        del events[: index + 1]
                        return event
                events.append(message())
            raise SystemExit("no %s within %s s" % (name, seconds))
        target = call("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = call("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        call("Page.enable", session=session)
        call("Runtime.enable", session=session)
        def evaluate(expression):
            result = call("Runtime.evaluate", {"expression": expression, "returnByValue": True, "awaitPromise": True},
                          session)
            if "exceptionDetails" in result:
                raise SystemExit("%s threw: %s" % (expression, json.dumps(result["exceptionDetails"])[:1000]))
            return result["result"].get("value")
        values = []
        scripts_off = False
        for step in plan:
            kind = step["do"]
            value = None
            if kind == "navigate":
                del events[:]
                outcome = call("Page.navigate", {"url": step["url"]}, session)
                if outcome.get("errorText"):
                    raise SystemExit("navigate %s: %s" % (step["url"], outcome["errorText"]))
                wait_event("Page.loadEventFired", 30)
            elif kind == "evaluate":
                value = json.dumps(evaluate(step["expression"]))
            elif kind == "waitFor":
                deadline = time.time() + step["seconds"]
                while True:
                    last = evaluate(step["expression"])
                    if last:
                        value = json.dumps(last)
                        break
                    if time.time() > deadline:
                        raise SystemExit("waited %s s for %s; it is %s" % (step["seconds"], step["expression"], json.dumps(last)))
                    time.sleep(0.1)
            elif kind == "screenshot":
                # Two animation frames: what the page last changed is painted (without scripts, nothing changes).
                if not scripts_off:
                    evaluate("new Promise(done => requestAnimationFrame(() => requestAnimationFrame(() => done(true))))")
                shot = call("Page.captureScreenshot", {"format": "png", "captureBeyondViewport": step["fullPage"]}, session)
                with open(step["path"], "wb") as output:
                    output.write(base64.b64decode(shot["data"]))
            elif kind == "viewport":
                call("Emulation.setDeviceMetricsOverride",
                     {"width": step["width"], "height": step["height"], "deviceScaleFactor": 2 if step["mobile"] else 1,
                      "mobile": step["mobile"]}, session)
            elif kind == "darkMode":
                call("Emulation.setEmulatedMedia",
                     {"features": [{"name": "prefers-color-scheme", "value": "dark" if step["dark"] else "light"}]}, session)
            elif kind == "scriptsOff":
                call("Emulation.setScriptExecutionDisabled", {"value": True}, session)
                scripts_off = True
            elif kind == "touch":
                open(step["path"], "w").close()
            elif kind == "waitForFile":
                deadline = time.time() + step["seconds"]
                while not os.path.exists(step["path"]):
                    if time.time() > deadline:
                        raise SystemExit("waited %s s for %s" % (step["seconds"], step["path"]))
                    time.sleep(0.05)
            values.append(value)
        try:
            call("Browser.close")
        except SystemExit:
            pass
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
        print(json.dumps(values))
        """#
}
