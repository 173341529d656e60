extension WebPage {
    /// The page's script (`/page.js`), plain JavaScript with no library.
    ///
    /// On loading and then every 3 seconds while the tab is visible, it fetches `/state.json`, updates the header
    /// and rebuilds the hosts, seen and events sections with the markup `html` renders, from text nodes and elements
    /// only (never `innerHTML`), times in the browser's zone and leases counted from the state's `generatedAt`. A
    /// section is rebuilt only when its part of the state changed, the seen machines not while text in them is
    /// selected, and a focused button keeps the focus. When the fetch fails it says "disconnected, retrying" in
    /// `#status` and keeps showing the last state.
    ///
    /// The Wake and Forget buttons POST `{"host": MAC}` to `/api/wake` or `/api/forget` with the token from `#token`
    /// (kept in the tab's `sessionStorage`) as `Authorization: Bearer`, and show the answer's `message`; Forget asks
    /// first. Each declaration gets a Copy button. A change of `actionsEnabled` (the daemon reloaded its config)
    /// reloads the page, which is then rendered with or without the buttons.
    public static let script: String = #"""
        "use strict";
        (function () {
          var REFRESH_MS = 3000;
          var TOKEN_KEY = "sleepproxy-token";
          var DASH = "\u2014";
          var body = document.body;
          var statusLine = document.getElementById("status");
          var tokenField = document.getElementById("token");
          var actionsOn = body.getAttribute("data-actions") === "on";
          var lastKeys = { hosts: null, seen: null, events: null };
          var disconnected = false;
          var fetching = false;

          // Elements

          function el(tag, className, children) {
            var node = document.createElement(tag);
            if (className) node.className = className;
            (children || []).forEach(function (child) {
              if (child === null || child === undefined) return;
              node.appendChild(typeof child === "string" ? document.createTextNode(child) : child);
            });
            return node;
          }

          function list(items) {
            if (!items || items.length === 0) return DASH;
            return el("ul", null, items.map(function (item) { return el("li", null, [item]); }));
          }

          // Times

          function pad(value, width) {
            var text = String(value);
            while (text.length < width) text = "0" + text;
            return text;
          }

          function sameDay(a, b) {
            return a.getFullYear() === b.getFullYear() && a.getMonth() === b.getMonth() && a.getDate() === b.getDate();
          }

          // HH:MM:SS on the day of `today`, else with the date, in this browser's zone.
          function clockTime(date, today) {
            var time = pad(date.getHours(), 2) + ":" + pad(date.getMinutes(), 2) + ":" + pad(date.getSeconds(), 2);
            if (sameDay(date, today)) return time;
            return pad(date.getFullYear(), 4) + "-" + pad(date.getMonth() + 1, 2) + "-" + pad(date.getDate(), 2) +
              " " + time;
          }

          function timeElement(text, today) {
            var date = new Date(text);
            var node = el("time", null, [isNaN(date.getTime()) ? text : clockTime(date, today)]);
            node.setAttribute("datetime", text);
            return node;
          }

          function duration(seconds) {
            var total = Math.max(0, Math.round(seconds));
            var units = [["d", 86400], ["h", 3600], ["min", 60], ["s", 1]];
            for (var i = 0; i < units.length; i++) {
              if (total < units[i][1]) continue;
              var text = Math.floor(total / units[i][1]) + " " + units[i][0];
              if (i + 1 < units.length) {
                var minor = Math.floor((total % units[i][1]) / units[i + 1][1]);
                if (minor > 0) text += " " + minor + " " + units[i + 1][0];
              }
              return text;
            }
            return "0 s";
          }

          // What the server renders the same way

          function stateFamily(state) {
            switch (state) {
              case "awake": return "awake";
              case "probing": return "probing";
              case "held": case "asleep: held": return "asleep-held";
              case "taking-over": case "asleep: taking-over": return "taking-over";
              case "waking": return "waking";
              default: return state.indexOf("asleep: not held") === 0 ? "not-held" : "other";
            }
          }

          function eventFamily(kind) {
            switch (kind) {
              case "registered": case "renewed": return "good";
              case "wake": case "would-wake": case "takeover": return "notice";
              case "refused": case "conflict": case "expired": return "bad";
              default: return "plain";
            }
          }

          function source(address, port) {
            if (address === null || address === undefined) return null;
            if (port === null || port === undefined) return address;
            return address.indexOf(":") >= 0 ? "[" + address + "]:" + port : address + ":" + port;
          }

          function leaseLeft(host, generatedAt) {
            if (host.declared || !host.leaseExpiresAt) return DASH;
            var left = (new Date(host.leaseExpiresAt).getTime() - generatedAt.getTime()) / 1000;
            if (isNaN(left)) return DASH;
            return left > 0 ? duration(left) : "expired";
          }

          function cell(className, label, children) {
            var node = el("td", className, children);
            node.setAttribute("data-label", label);
            return node;
          }

          function actionButton(action, label, mac) {
            var button = el("button", null, [label]);
            button.type = "button";
            button.setAttribute("data-action", action);
            button.setAttribute("data-host", mac);
            return button;
          }

          function hostRow(host, state, generatedAt) {
            var row = el("tr", "host");
            row.setAttribute("data-mac", host.ownerMAC);
            row.setAttribute("data-state", host.state);

            var name = [el("span", "hostname", [host.name || host.ownerMAC])];
            if (host.name) name.push(" ", el("span", "mac", [host.ownerMAC]));
            if (host.declared) name.push(" ", el("span", "declared", ["[hosts." + host.declared + "]"]));
            row.appendChild(cell("name", "Host", name));

            var stateParts = [el("span", "badge badge-" + stateFamily(host.state), [host.state])];
            var lastReason = host.lastWake ? host.lastWake.reason : null;
            if (host.state === "waking" && host.wakeReason && host.wakeReason !== lastReason) {
              stateParts.push(" ", el("span", "reason", [host.wakeReason]));
            }
            row.appendChild(cell("state", "State", stateParts));

            row.appendChild(cell("addresses", "Addresses", [list(host.addresses)]));
            row.appendChild(cell("services", "Services", [list(host.services)]));
            row.appendChild(cell("lease", "Lease left", [leaseLeft(host, generatedAt)]));

            var wake = ["never"];
            if (host.lastWake) {
              wake = [timeElement(host.lastWake.time, generatedAt), " ", el("span", "reason", [host.lastWake.reason])];
              var from = source(host.lastWake.sourceAddress, host.lastWake.sourcePort);
              if (from !== null) wake.push(" ", el("span", "source", ["from " + from]));
            }
            row.appendChild(cell("wake", "Last wake", wake));

            if (state.actionsEnabled) {
              // Only a host the proxy holds can be woken or forgotten.
              var held = ["asleep-held", "taking-over", "waking"].indexOf(stateFamily(host.state)) >= 0;
              var buttons = [];
              if (held) buttons.push(actionButton("wake", "Wake", host.ownerMAC));
              if (held && !host.declared) buttons.push(" ", actionButton("forget", "Forget", host.ownerMAC));
              row.appendChild(cell("actions", "Actions", buttons));
            }
            return row;
          }

          function interfaceOrder(state) {
            var order = state.interfaces.slice();
            state.hosts.forEach(function (host) {
              if (order.indexOf(host.interface) < 0) order.push(host.interface);
            });
            return order;
          }

          function hostsContent(state, generatedAt) {
            var parts = [el("h2", null, ["Hosts"])];
            if (state.hosts.length === 0) parts.push(el("p", "empty", ["No hosts held or declared."]));
            interfaceOrder(state).forEach(function (name) {
              var hosts = state.hosts.filter(function (host) { return host.interface === name; });
              if (hosts.length === 0) return;
              parts.push(el("h3", "interface", [name]));
              var headings = ["Host", "State", "Addresses", "Services", "Lease left", "Last wake"];
              if (state.actionsEnabled) headings.push("Actions");
              var headRow = el("tr", null, headings.map(function (heading) {
                var th = el("th", null, [heading]);
                th.setAttribute("scope", "col");
                return th;
              }));
              var rows = hosts.map(function (host) { return hostRow(host, state, generatedAt); });
              var table = el("table", "hosts", [el("thead", null, [headRow]), el("tbody", null, rows)]);
              table.setAttribute("data-interface", name);
              parts.push(table);
            });
            return parts;
          }

          function definition(term, className, value) {
            return [el("dt", null, [term]), el("dd", className, [value])];
          }

          function seenContent(state, generatedAt) {
            var parts = [el("h2", null, ["Machines seen, not declared"])];
            if (state.seen.length === 0) {
              parts.push(el("p", "empty", ["No undeclared machines heard."]));
            } else {
              parts.push(el("p", "hint", [
                "To have the proxy answer for one of these and wake it, add its table to the config file."
              ]));
            }
            state.seen.forEach(function (seen) {
              var machine = seen.machine;
              var services = machine.services.map(function (service) {
                return service.name + " (" + service.type + ", port " + service.port + ")";
              });
              var terms = [].concat(
                definition("MAC", "mac", machine.mac),
                machine.vendor ? definition("Vendor", "vendor", machine.vendor) : [],
                definition("Interface", "interface", machine.interface),
                definition("Addresses", "addresses", list(machine.addresses)),
                definition("Services", "services", list(services)),
                definition("Last heard", "heard", timeElement(machine.lastHeard, generatedAt))
              );
              var declaration = el("div", "declaration", [el("pre", null, [el("code", null, [seen.declaration])])]);
              var article = el("article", "machine", [
                el("h3", null, [machine.hostName || machine.mac]), el("dl", null, terms), declaration
              ]);
              article.setAttribute("data-mac", machine.mac);
              parts.push(article);
            });
            return parts;
          }

          function eventsContent(state, generatedAt) {
            var parts = [el("h2", null, ["Recent events"])];
            if (state.events.length === 0) {
              parts.push(el("p", "empty", ["No events recorded."]));
              return parts;
            }
            var items = state.events.map(function (event) {
              var detail = event.detail;
              if (event.reason && detail.indexOf(event.reason) < 0) detail += " (" + event.reason + ")";
              var children = [
                timeElement(event.time, generatedAt), " ",
                el("span", "kind kind-" + eventFamily(event.kind), [event.kind]), " ",
                el("span", "interface", [event.interface]), " ",
                el("span", "host", [event.host || event.ownerMAC || DASH]), " "
              ];
              var from = source(event.sourceAddress, event.sourcePort);
              if (from !== null) children.push(el("span", "source", ["from " + from]), " ");
              children.push(el("span", "detail", [detail]));
              var item = el("li", "event", children);
              item.setAttribute("data-kind", event.kind);
              return item;
            });
            parts.push(el("ol", "events", items));
            return parts;
          }

          // Rendering a new state

          function replaceContent(section, parts) {
            while (section.firstChild) section.removeChild(section.firstChild);
            parts.forEach(function (part) { section.appendChild(part); });
          }

          function selectionInside(node) {
            var selection = window.getSelection ? window.getSelection() : null;
            return selection !== null && !selection.isCollapsed && node.contains(selection.anchorNode);
          }

          function render(state) {
            // Times count from the daemon's clock, not this device's: a date shows when it is not that day's.
            var generatedAt = new Date(state.generatedAt);
            if (isNaN(generatedAt.getTime())) generatedAt = new Date();

            document.getElementById("server").textContent = state.serverName;
            document.getElementById("version").textContent = state.version;
            document.getElementById("interfaces").textContent = state.interfaces.join(", ");
            var updated = document.getElementById("updated");
            updated.setAttribute("datetime", state.generatedAt);
            updated.textContent = clockTime(generatedAt, generatedAt);
            document.title = "sleepproxy on " + state.serverName;

            // Leases count down with each state, so the hosts' key holds the moment too.
            var keys = {
              hosts: JSON.stringify([state.hosts, state.interfaces, state.generatedAt]),
              seen: JSON.stringify(state.seen),
              events: JSON.stringify(state.events)
            };

            var hostsSection = document.getElementById("hosts");
            if (keys.hosts !== lastKeys.hosts) {
              var focused = document.activeElement;
              var focusAction = focused && hostsSection.contains(focused) ? focused.getAttribute("data-action") : null;
              var focusHost = focusAction ? focused.getAttribute("data-host") : null;
              replaceContent(hostsSection, hostsContent(state, generatedAt));
              if (focusAction) {
                var buttons = hostsSection.querySelectorAll("button[data-action]");
                for (var i = 0; i < buttons.length; i++) {
                  if (buttons[i].getAttribute("data-action") === focusAction &&
                    buttons[i].getAttribute("data-host") === focusHost) {
                    buttons[i].focus();
                    break;
                  }
                }
              }
              lastKeys.hosts = keys.hosts;
            }

            // Not while the reader is selecting a declaration to copy it.
            var seenSection = document.getElementById("seen");
            if (keys.seen !== lastKeys.seen && !selectionInside(seenSection)) {
              replaceContent(seenSection, seenContent(state, generatedAt));
              addCopyButtons();
              lastKeys.seen = keys.seen;
            }

            if (keys.events !== lastKeys.events) {
              replaceContent(document.getElementById("events"), eventsContent(state, generatedAt));
              lastKeys.events = keys.events;
            }
          }

          // Messages

          function say(message, isError) {
            statusLine.textContent = message;
            statusLine.className = isError ? "error" : "";
          }

          // Fetching the state

          function refresh() {
            if (fetching) return Promise.resolve();
            fetching = true;
            return fetch("/state.json", { cache: "no-store", credentials: "same-origin" })
              .then(function (response) {
                if (!response.ok) throw new Error("HTTP " + response.status + " " + response.statusText);
                return response.json();
              })
              .then(function (state) {
                if (state.actionsEnabled !== actionsOn) {
                  window.location.reload();
                  return;
                }
                if (disconnected) say("", false);
                disconnected = false;
                render(state);
              })
              .catch(function (error) {
                disconnected = true;
                say("disconnected, retrying (" + error.message + ")", true);
              })
              .then(function () { fetching = false; });
          }

          function loop() {
            var next = function () { window.setTimeout(loop, REFRESH_MS); };
            if (document.hidden) {
              next();
              return;
            }
            refresh().then(next);
          }

          document.addEventListener("visibilitychange", function () {
            if (!document.hidden) refresh();
          });

          // Wake and Forget

          function readToken() {
            return tokenField ? tokenField.value.trim() : "";
          }

          function hostLabel(button) {
            var row = button.closest("tr");
            var name = row ? row.querySelector(".hostname") : null;
            return name ? name.textContent : button.getAttribute("data-host");
          }

          function act(button) {
            var action = button.getAttribute("data-action");
            var host = button.getAttribute("data-host");
            var label = hostLabel(button);
            if (action === "forget" && !window.confirm(
              "Forget " + label + "? The proxy stops answering for it and lets its addresses go until it registers " +
              "again.")) {
              return;
            }
            var token = readToken();
            if (token === "") {
              say("enter the token first (it is under [web] in the config file)", true);
              if (tokenField) tokenField.focus();
              return;
            }
            button.disabled = true;
            say((action === "wake" ? "waking " : "forgetting ") + label + "\u2026", false);
            fetch("/api/" + action, {
              method: "POST",
              cache: "no-store",
              credentials: "same-origin",
              headers: { "Content-Type": "application/json", "Authorization": "Bearer " + token },
              body: JSON.stringify({ host: host })
            })
              .then(function (response) {
                return response.json().then(
                  function (answer) { return { response: response, answer: answer }; },
                  function () { return { response: response, answer: null }; }
                );
              })
              .then(function (result) {
                var response = result.response;
                var answer = result.answer;
                if (response.ok && answer && answer.ok) {
                  say(answer.message, false);
                } else if (response.status === 401) {
                  say("the token is wrong or missing (HTTP 401)", true);
                } else if (answer && typeof answer.message === "string") {
                  say(answer.message, true);
                } else {
                  say("HTTP " + response.status + " " + response.statusText, true);
                }
                return refresh();
              })
              .catch(function (error) {
                say("could not reach the daemon: " + error.message, true);
              })
              .then(function () { button.disabled = false; });
          }

          // Copying a declaration

          function copy(button) {
            var code = button.parentNode.querySelector("code");
            if (!code) return;
            var text = code.textContent;
            var selectIt = function () {
              var range = document.createRange();
              range.selectNodeContents(code);
              var selection = window.getSelection();
              selection.removeAllRanges();
              selection.addRange(range);
              var copied = false;
              try { copied = document.execCommand("copy"); } catch (error) { copied = false; }
              say(copied ? "declaration copied" : "declaration selected: copy it with Ctrl+C or \u2318C", false);
            };
            if (navigator.clipboard && window.isSecureContext) {
              navigator.clipboard.writeText(text).then(function () { say("declaration copied", false); }, selectIt);
            } else {
              selectIt();
            }
          }

          function addCopyButtons() {
            var blocks = document.querySelectorAll("#seen .declaration");
            for (var i = 0; i < blocks.length; i++) {
              if (blocks[i].querySelector("button.copy")) continue;
              var button = el("button", "copy", ["Copy"]);
              button.type = "button";
              button.setAttribute("data-copy", "");
              blocks[i].appendChild(button);
            }
          }

          // Wiring

          document.addEventListener("click", function (event) {
            var target = event.target instanceof Element ? event.target.closest("button") : null;
            if (!target) return;
            if (target.hasAttribute("data-action")) act(target);
            else if (target.hasAttribute("data-copy")) copy(target);
          });

          if (tokenField) {
            try {
              var saved = window.sessionStorage.getItem(TOKEN_KEY);
              if (saved) tokenField.value = saved;
            } catch (error) {
              // No storage in this browser mode: the field is typed in again after each reload.
            }
            tokenField.addEventListener("input", function () {
              try { window.sessionStorage.setItem(TOKEN_KEY, tokenField.value); } catch (error) { /* as above */ }
            });
          }
          var form = document.getElementById("token-form");
          if (form) form.addEventListener("submit", function (event) { event.preventDefault(); });

          addCopyButtons();
          loop();
        })();
        """#
}
