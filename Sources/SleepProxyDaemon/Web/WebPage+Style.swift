extension WebPage {
    /// The page's stylesheet (`/page.css`): system fonts only, light and dark after the browser's preference, and
    /// on a narrow screen (a phone, under 600 px) each host's row as a card of labelled lines.
    public static let css: String = #"""
        :root {
          --text: #1d1d1f;
          --muted: #5f6368;
          --background: #ffffff;
          --panel: #f4f5f7;
          --line: #d9dce1;
          --accent: #0a63c9;
          --good: #1b7f3a;
          --good-background: #e3f4e8;
          --notice: #8a5a00;
          --notice-background: #fdf1d6;
          --bad: #b3261e;
          --bad-background: #fbe4e2;
          --calm: #3949ab;
          --calm-background: #e6e9f8;
          --plain-background: #eceef1;
        }

        @media (prefers-color-scheme: dark) {
          :root {
            --text: #e8e8ea;
            --muted: #a0a4aa;
            --background: #16181b;
            --panel: #212429;
            --line: #363a41;
            --accent: #6fb1ff;
            --good: #7dd694;
            --good-background: #173523;
            --notice: #f2c469;
            --notice-background: #3b2f12;
            --bad: #ff8f87;
            --bad-background: #45201d;
            --calm: #a9b4ff;
            --calm-background: #242a4a;
            --plain-background: #2c3036;
          }
        }

        * { box-sizing: border-box; }

        body {
          margin: 0 auto;
          max-width: 72rem;
          padding: 1rem;
          font-family: system-ui, -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial, sans-serif;
          font-size: 1rem;
          line-height: 1.45;
          color: var(--text);
          background: var(--background);
        }

        code, pre, .mac, time, .source {
          font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, "Liberation Mono", monospace;
          font-size: 0.9em;
        }

        h1 { font-size: 1.5rem; margin: 0 0 0.25rem; }
        h2 { font-size: 1.2rem; margin: 2rem 0 0.5rem; border-bottom: 1px solid var(--line); padding-bottom: 0.25rem; }
        h3 { font-size: 1rem; margin: 1rem 0 0.5rem; }

        .meta, .hint, .empty, .mac, .declared, .source, .interface { color: var(--muted); }
        .hint, .empty { font-size: 0.9rem; }

        #status { min-height: 1.5em; margin: 0.75rem 0; font-weight: 600; }
        #status.error { color: var(--bad); }

        .note, .token {
          padding: 0.6rem 0.8rem;
          border: 1px solid var(--line);
          border-radius: 0.5rem;
          background: var(--panel);
        }
        .token label { font-weight: 600; margin-right: 0.5rem; }
        .token input {
          font: inherit;
          padding: 0.3rem 0.5rem;
          border: 1px solid var(--line);
          border-radius: 0.35rem;
          color: var(--text);
          background: var(--background);
          max-width: 100%;
        }

        table.hosts { width: 100%; border-collapse: collapse; }
        table.hosts th, table.hosts td {
          text-align: left;
          vertical-align: top;
          padding: 0.5rem 0.6rem;
          border-bottom: 1px solid var(--line);
        }
        table.hosts th { font-size: 0.85rem; color: var(--muted); font-weight: 600; }
        table.hosts td.lease, table.hosts td.actions { white-space: nowrap; }
        td ul, dd ul { list-style: none; margin: 0; padding: 0; }
        .hostname { font-weight: 600; }
        .mac, .declared { display: block; font-size: 0.85rem; }

        .badge {
          display: inline-block;
          padding: 0.1rem 0.55rem;
          border-radius: 1rem;
          font-size: 0.85rem;
          font-weight: 600;
          white-space: nowrap;
          color: var(--text);
          background: var(--plain-background);
        }
        .badge-awake { color: var(--good); background: var(--good-background); }
        .badge-asleep-held { color: var(--calm); background: var(--calm-background); }
        .badge-probing, .badge-taking-over { color: var(--notice); background: var(--notice-background); }
        .badge-waking { color: var(--notice); background: var(--notice-background); outline: 2px solid var(--notice); }
        .badge-not-held { color: var(--bad); background: var(--bad-background); white-space: normal; }
        .state .reason { display: block; font-size: 0.85rem; margin-top: 0.25rem; }

        button {
          font: inherit;
          font-size: 0.9rem;
          padding: 0.35rem 0.9rem;
          margin: 0 0.25rem 0.25rem 0;
          border: 1px solid var(--line);
          border-radius: 0.4rem;
          color: var(--text);
          background: var(--panel);
          cursor: pointer;
        }
        button:hover, button:focus-visible { border-color: var(--accent); }
        button:disabled { opacity: 0.5; cursor: progress; }
        button[data-action="wake"] { color: #ffffff; background: var(--accent); border-color: var(--accent); }
        @media (prefers-color-scheme: dark) {
          button[data-action="wake"] { color: #0b1a2b; }
        }

        article.machine {
          margin: 0 0 1rem;
          padding: 0.6rem 0.9rem;
          border: 1px solid var(--line);
          border-radius: 0.5rem;
        }
        article.machine h3 { margin-top: 0.25rem; }
        dl { display: grid; grid-template-columns: max-content 1fr; gap: 0.2rem 1rem; margin: 0 0 0.75rem; }
        dt { color: var(--muted); }
        dd { margin: 0; overflow-wrap: anywhere; }
        .declaration { position: relative; }
        .declaration pre {
          margin: 0;
          padding: 0.6rem 0.8rem;
          overflow-x: auto;
          border-radius: 0.4rem;
          background: var(--panel);
        }
        .declaration button.copy { position: absolute; top: 0.4rem; right: 0.4rem; margin: 0; }

        ol.events { list-style: none; margin: 0; padding: 0; }
        li.event { padding: 0.35rem 0; border-bottom: 1px solid var(--line); overflow-wrap: anywhere; }
        .kind { display: inline-block; min-width: 6.5rem; font-weight: 600; }
        .kind-good { color: var(--good); }
        .kind-notice { color: var(--notice); }
        .kind-bad { color: var(--bad); }

        @media (max-width: 600px) {
          body { padding: 0.75rem; }
          table.hosts, table.hosts tbody, table.hosts tr, table.hosts td { display: block; width: 100%; }
          table.hosts thead { display: none; }
          table.hosts tr.host {
            margin: 0 0 0.9rem;
            padding: 0.4rem 0.7rem;
            border: 1px solid var(--line);
            border-radius: 0.6rem;
          }
          table.hosts td {
            position: relative;
            min-height: 1.9rem;
            padding: 0.35rem 0 0.35rem 7rem;
            border-bottom: none;
            overflow-wrap: anywhere;
          }
          table.hosts td::before {
            content: attr(data-label);
            position: absolute;
            left: 0;
            top: 0.45rem;
            width: 6.5rem;
            color: var(--muted);
            font-size: 0.85rem;
          }
          table.hosts td.actions button { padding: 0.55rem 1.2rem; }
          .kind { min-width: 0; }
          li.event span { margin-right: 0.25rem; }
        }
        """#
}
