import FleetCore

/// The live map page: its HTML, script and style, served by ``FleetMapServer`` at `/`,
/// `/map.js` and `/map.css`. Kept as string constants so the binary is the whole application
/// (no resource bundle to install beside it); Leaflet itself comes from Debian's
/// `libjs-leaflet` at `/leaflet/`.
///
/// Everything that comes from the fleet (vehicle ids above all: untrusted MQTT data) reaches
/// the page as JSON and is put in the document with `textContent` or `setAttribute`, never
/// `innerHTML`; the only HTML the script writes is a constant. The page exposes its state in
/// the DOM for tests and tools: `body[data-connection]` (`connecting`, `open`, `closed`),
/// `body[data-vehicles]`, `body[data-snapshots]`, `body[data-updates]`, and per vehicle a list
/// entry and a marker element with `data-vehicle`, `data-status`, `data-lat`, `data-lon`.
/// `/#follow=ID` selects and follows vehicle `ID` once it is on the map. With a track history
/// (`serve --postgres`), the selected vehicle's details offer a time range ("From", "To", in
/// the browser's time zone) whose recorded track is drawn dashed; `body[data-history-vehicle]`
/// and `body[data-history-points]` then say which and how many fixes. "Trips" lists the
/// vehicle's trips and stops of that range (`/api/trips`), stops marked on the map
/// (`body[data-trips]`, `body[data-stops]`); a trip picked from the list is played back: its
/// track drawn, a marker moving along it by its fixes' times, a time slider and play/pause
/// (`body[data-playback-points]`, `[data-playback-index]`, `[data-playback-state]`). With
/// zones (`serve --zones`), they are drawn (`body[data-zones]`).
enum MapPage {
    /// The page, with `configuration` (see ``MapJSON/pageConfiguration(tiles:attribution:staleAfter:trailWindow:flushInterval:)``,
    /// which writes no `<`) in a JSON script element the script reads.
    static func html(configuration: String) -> String {
        """
        <!doctype html>
        <html lang="en">
        <head>
        <meta charset="utf-8">
        <meta name="viewport" content="width=device-width, initial-scale=1">
        <title>Fleetcast — live map</title>
        <link rel="stylesheet" href="/leaflet/leaflet.css">
        <link rel="stylesheet" href="/map.css">
        <script type="application/json" id="config">\(configuration)</script>
        </head>
        <body data-connection="connecting" data-vehicles="0" data-snapshots="0" data-updates="0">
        <aside id="side">
          <header><strong>Fleetcast</strong> <span id="connection">connecting…</span></header>
          <input id="filter" type="search" placeholder="Find a vehicle" maxlength="64" autocomplete="off" spellcheck="false">
          <div id="counts"></div>
          <label class="follow"><input type="checkbox" id="follow"> Follow the selected vehicle</label>
          <ul id="list"></ul>
          <section id="details" hidden>
            <h2 id="details-title"></h2>
            <dl id="details-list"></dl>
            <form id="history" hidden>
              <label>From <input type="datetime-local" id="history-since" step="60" required></label>
              <label>To <input type="datetime-local" id="history-until" step="60" required></label>
              <button type="submit" id="history-show">Show track</button>
              <button type="button" id="history-clear">Clear</button>
              <button type="button" id="history-trips">Trips</button>
              <div id="history-status"></div>
              <ol id="trips"></ol>
              <div id="playback" hidden>
                <button type="button" id="playback-play">Play</button>
                <input type="range" id="playback-time" min="0" max="0" value="0" step="1">
                <span id="playback-clock"></span>
              </div>
            </form>
          </section>
        </aside>
        <main id="map"></main>
        <script src="/leaflet/leaflet.js"></script>
        <script src="/map.js"></script>
        </body>
        </html>

        """
    }

    /// The page's style: online vehicles green, stale amber, offline grey, unknown blue.
    static let style = """
        html, body { margin: 0; height: 100%; font: 14px/1.35 system-ui, sans-serif; }
        body { display: flex; }
        #side { width: 280px; display: flex; flex-direction: column; border-right: 1px solid #ccc; background: #fafafa; }
        #side header { padding: 8px 10px; border-bottom: 1px solid #ddd; }
        #connection { float: right; font-size: 12px; color: #a60; }
        body[data-connection="open"] #connection { color: #080; }
        #filter { margin: 8px 10px 4px; padding: 4px 6px; }
        #counts { padding: 0 10px; font-size: 12px; color: #555; }
        .follow { padding: 4px 10px; font-size: 13px; }
        #list { list-style: none; margin: 0; padding: 0; overflow-y: auto; flex: 1; border-top: 1px solid #ddd; }
        #list li { padding: 3px 10px; cursor: pointer; display: flex; gap: 6px; align-items: center; white-space: nowrap; }
        #list li:hover { background: #eef; }
        #list li.selected { background: #dde6ff; }
        #list .name { flex: 1; overflow: hidden; text-overflow: ellipsis; }
        #list .info { font-size: 12px; color: #666; }
        .dot { width: 10px; height: 10px; border-radius: 50%; flex: none; background: #36c; }
        [data-status="online"] .dot { background: #2a2; }
        [data-status="stale"] .dot { background: #e90; }
        [data-status="offline"] .dot { background: #999; }
        #details { border-top: 1px solid #ccc; padding: 6px 10px 10px; background: #fff; }
        #details h2 { font-size: 15px; margin: 0 0 4px; overflow-wrap: anywhere; }
        #details dl { display: grid; grid-template-columns: auto 1fr; gap: 2px 10px; margin: 0; font-size: 13px; }
        #details dt { color: #666; }
        #details dd { margin: 0; }
        #history { margin-top: 8px; display: grid; gap: 4px; font-size: 13px; }
        #history label { display: flex; justify-content: space-between; gap: 6px; }
        #history-status { color: #555; }
        #trips { margin: 4px 0 0; padding-left: 20px; max-height: 30vh; overflow-y: auto; }
        #trips li { cursor: pointer; padding: 2px 0; }
        #trips li[data-kind="stop"] { color: #a50; }
        #trips li.playing { font-weight: bold; }
        #playback { display: grid; grid-template-columns: auto 1fr; gap: 4px; align-items: center; }
        #playback-clock { grid-column: 1 / 3; color: #555; }
        #map { flex: 1; background: #e8ecef; }
        .vehicle { background: none; border: none; }
        .vehicle .arrow { width: 22px; height: 22px; transform-origin: 50% 50%; }
        .vehicle .arrow::before { content: ""; position: absolute; left: 4px; top: 0; border-left: 7px solid transparent;
          border-right: 7px solid transparent; border-bottom: 22px solid #36c; filter: drop-shadow(0 0 1px #fff); }
        .vehicle[data-status="online"] .arrow::before { border-bottom-color: #2a2; }
        .vehicle[data-status="stale"] .arrow::before { border-bottom-color: #e90; }
        .vehicle[data-status="offline"] .arrow::before { border-bottom-color: #999; }
        .vehicle[data-status="offline"] { opacity: 0.6; }
        .vehicle.no-heading .arrow::before { left: 3px; top: 3px; border: 3px solid #fff; border-radius: 50%; width: 10px; height: 10px;
          background: #36c; }
        .vehicle.no-heading[data-status="online"] .arrow::before { background: #2a2; }
        .vehicle.no-heading[data-status="stale"] .arrow::before { background: #e90; }
        .vehicle.no-heading[data-status="offline"] .arrow::before { background: #999; }
        .vehicle.selected .arrow { outline: 2px solid #036; border-radius: 50%; }

        """

    /// The page's script (Leaflet 1.x API).
    static let script = #"""
        "use strict";
        (function () {
          const config = JSON.parse(document.getElementById("config").textContent);
          const body = document.body;
          const map = L.map("map", { preferCanvas: true, worldCopyJump: true }).setView([20, 0], 2);
          if (config.tiles) {
            L.tileLayer(config.tiles, { maxZoom: 19, attribution: config.attribution || "" }).addTo(map);
          }
          L.control.scale().addTo(map);

          const colours = { online: "#2a2", stale: "#e90", offline: "#999", unknown: "#36c" };
          const modes = { 1: "no fix", 2: "2D", 3: "3D" };
          const trailSpacing = Math.max(1000, config.trailMs / 60);
          const vehicles = new Map();  // id → { data, li, marker, trail, points: [[lat, lon, t]] }
          const sortedIDs = [];
          const list = document.getElementById("list");
          const filter = document.getElementById("filter");
          const follow = document.getElementById("follow");
          const details = document.getElementById("details");
          let offset = 0;  // the server's clock minus ours (ms)
          let selected = null;
          let fitted = false;
          let snapshots = 0, updates = 0;

          function serverNow() { return Date.now() + offset; }

          function statusOf(d) {
            if (d.state === "offline") return "offline";
            // A parked vehicle (online, slower than 0.5 m/s) reports once an hour: stale only
            // after 75 minutes (a vehicle whose broker node died sent no last will).
            const parked = d.state === "online" && d.spd != null && d.spd < 0.5;
            const limit = parked ? Math.max(config.staleAfterMs, config.parkedStaleAfterMs) : config.staleAfterMs;
            if (serverNow() - d.seen > limit) return "stale";
            return d.state === "online" ? "online" : "unknown";
          }

          function age(ms) {
            const s = Math.max(0, Math.round(ms / 1000));
            if (s < 60) return s + " s";
            if (s < 3600) return Math.floor(s / 60) + " min " + (s % 60) + " s";
            return Math.floor(s / 3600) + " h " + Math.floor((s % 3600) / 60) + " min";
          }

          function entry(id) {
            let v = vehicles.get(id);
            if (v) return v;
            const li = document.createElement("li");
            li.setAttribute("data-vehicle", id);
            const dot = document.createElement("span");
            dot.className = "dot";
            const name = document.createElement("span");
            name.className = "name";
            name.textContent = id;
            const info = document.createElement("span");
            info.className = "info";
            li.append(dot, name, info);
            li.addEventListener("click", () => select(id, true));
            // Sorted by id: binary search for the place.
            let lo = 0, hi = sortedIDs.length;
            while (lo < hi) { const mid = (lo + hi) >> 1; if (sortedIDs[mid] < id) lo = mid + 1; else hi = mid; }
            list.insertBefore(li, lo < sortedIDs.length ? vehicles.get(sortedIDs[lo]).li : null);
            sortedIDs.splice(lo, 0, id);
            v = { data: null, li: li, info: info, marker: null, trail: null, points: [] };
            vehicles.set(id, v);
            applyFilter(v);
            return v;
          }

          function remove(id) {
            const v = vehicles.get(id);
            if (!v) return;
            if (v.marker) v.marker.remove();
            if (v.trail) v.trail.remove();
            v.li.remove();
            vehicles.delete(id);
            sortedIDs.splice(sortedIDs.indexOf(id), 1);
            if (selected === id) select(null, false);
          }

          function applyFilter(v) {
            const text = filter.value.trim().toLowerCase();
            v.li.hidden = text !== "" && !v.li.getAttribute("data-vehicle").toLowerCase().includes(text);
          }

          function render(v) {
            const d = v.data;
            const status = statusOf(d);
            v.li.setAttribute("data-status", status);
            const moving = (status === "online" || status === "unknown") && d.spd != null;
              v.info.textContent = moving ? (d.spd * 3.6).toFixed(0) + " km/h" : status;
            if (v.marker) {
              const el = v.marker.getElement();
              if (el) {
                el.setAttribute("data-status", status);
                el.setAttribute("data-lat", String(d.lat));
                el.setAttribute("data-lon", String(d.lon));
                el.classList.toggle("no-heading", d.hdg == null);
                el.classList.toggle("selected", selected === d.id);
                el.firstChild.style.transform = "rotate(" + (d.hdg || 0) + "deg)";
              }
              v.trail.setStyle({ color: colours[status] });
            }
            if (selected === d.id) showDetails(v);
          }

          function place(v, d, trail, now) {
            if (d.lat == null || d.lon == null) return;
            const here = [d.lat, d.lon, d.t || now];
            if (trail) {
              v.points = [];
              for (let i = 0; i + 2 < trail.length; i += 3) v.points.push([trail[i], trail[i + 1], now + trail[i + 2] * 1000]);
            }
            const last = v.points[v.points.length - 1];
            if (!last || here[2] - last[2] >= trailSpacing) v.points.push(here);
            while (v.points.length > 0 && v.points[0][2] < here[2] - config.trailMs) v.points.shift();
            const line = v.points.map(p => [p[0], p[1]]);
            line.push([d.lat, d.lon]);
            if (!v.marker) {
              const icon = L.divIcon({ className: "vehicle", html: '<div class="arrow"></div>', iconSize: [22, 22], iconAnchor: [11, 11] });
              v.marker = L.marker([d.lat, d.lon], { icon: icon, keyboard: false }).addTo(map);
              v.marker.getElement().setAttribute("data-vehicle", d.id);
              v.marker.on("click", () => select(d.id, false));
              v.trail = L.polyline(line, { weight: 2, opacity: 0.7, interactive: false }).addTo(map);
            } else {
              v.marker.setLatLng([d.lat, d.lon]);
              v.trail.setLatLngs(line);
            }
            if (follow.checked && selected === d.id) map.panTo([d.lat, d.lon], { animate: false });
          }

          function apply(batch, isSnapshot) {
            offset = batch.now - Date.now();
            if (isSnapshot) {
              const present = new Set(batch.vehicles.map(d => d.id));
              for (const id of Array.from(vehicles.keys())) if (!present.has(id)) remove(id);
            }
            for (const d of batch.vehicles) {
              const v = entry(d.id);
              v.data = d;
              place(v, d, isSnapshot ? (d.trail || []) : null, batch.now);
              render(v);
            }
            body.setAttribute("data-vehicles", String(vehicles.size));
            counts();
            if (!fitted) {
              const points = batch.vehicles.filter(d => d.lat != null).map(d => [d.lat, d.lon]);
              if (points.length > 0) {
                map.fitBounds(L.latLngBounds(points).pad(0.2), { maxZoom: 16, animate: false });
                fitted = true;
                // A link can name a vehicle to follow: …/#follow=van-7.
                const wanted = decodeURIComponent(location.hash.replace(/^#follow=/, ""));
                if (location.hash.startsWith("#follow=") && vehicles.has(wanted)) {
                  follow.checked = true;
                  select(wanted, true);
                }
              }
            }
          }

          function counts() {
            const n = { online: 0, stale: 0, offline: 0, unknown: 0 };
            for (const v of vehicles.values()) n[statusOf(v.data)]++;
            document.getElementById("counts").textContent =
              vehicles.size + " vehicles: " + n.online + " online, " + n.stale + " stale, " + n.offline + " offline";
          }

          function row(dl, term, value) {
            const dt = document.createElement("dt");
            dt.textContent = term;
            const dd = document.createElement("dd");
            dd.textContent = value;
            dl.append(dt, dd);
          }

          function showDetails(v) {
            const d = v.data;
            details.hidden = false;
            document.getElementById("details-title").textContent = d.id;
            const dl = document.getElementById("details-list");
            dl.replaceChildren();
            row(dl, "State", statusOf(d));
            row(dl, "Speed", d.spd != null ? (d.spd * 3.6).toFixed(1) + " km/h (" + d.spd.toFixed(1) + " m/s)" : "–");
            row(dl, "Heading", d.hdg != null ? d.hdg.toFixed(0) + "°" : "–");
            row(dl, "Satellites", d.sats != null ? String(d.sats) : "–");
            row(dl, "Fix mode", d.mode != null ? (modes[d.mode] || String(d.mode)) : "–");
            row(dl, "Position", d.lat != null ? d.lat.toFixed(6) + ", " + d.lon.toFixed(6) : "–");
            row(dl, "Fix time", d.t != null ? new Date(d.t).toISOString().replace(".000Z", "Z") : "–");
            row(dl, "Age", age(serverNow() - d.seen));
            row(dl, "Seq gaps", String(d.gaps || 0));
          }

          function select(id, pan) {
            const previous = selected && vehicles.get(selected);
            selected = id;
            if (previous) { previous.li.classList.remove("selected"); render(previous); }
            const v = id && vehicles.get(id);
            if (!v) { details.hidden = true; return; }
            v.li.classList.add("selected");
            render(v);
            if (pan && v.data.lat != null) map.panTo([v.data.lat, v.data.lon], { animate: !follow.checked });
          }

          filter.addEventListener("input", () => { for (const v of vehicles.values()) applyFilter(v); });
          filter.addEventListener("keydown", e => {
            if (e.key !== "Enter") return;
            const first = sortedIDs.find(id => !vehicles.get(id).li.hidden);
            if (first) select(first, true);
          });
          follow.addEventListener("change", () => {
            const v = selected && vehicles.get(selected);
            if (follow.checked && v && v.data.lat != null) map.panTo([v.data.lat, v.data.lon]);
          });
          // Ages and staleness move with time, not only with messages.
          setInterval(() => { for (const v of vehicles.values()) render(v); counts(); }, 1000);

          // The recorded track of the selected vehicle, from /api/track (serve --postgres).
          const historyForm = document.getElementById("history");
          const historyStatus = document.getElementById("history-status");
          let historyLayer = null;

          function clearHistory() {
            if (historyLayer) { historyLayer.remove(); historyLayer = null; }
            body.removeAttribute("data-history-vehicle");
            body.removeAttribute("data-history-points");
            historyStatus.textContent = "";
          }

          function showHistory() {
            if (!selected) return;
            const since = new Date(document.getElementById("history-since").value);
            const until = new Date(document.getElementById("history-until").value);
            if (isNaN(since.getTime()) || isNaN(until.getTime()) || since >= until) {
              historyStatus.textContent = "Choose a start before the end.";
              return;
            }
            historyStatus.textContent = "Loading…";
            const query = "vehicle=" + encodeURIComponent(selected) + "&since=" + encodeURIComponent(since.toISOString()) +
              "&until=" + encodeURIComponent(until.toISOString());
            fetch("/api/track?" + query)
              .then(r => r.ok ? r.json() : r.text().then(t => { throw new Error(r.status + " " + t); }))
              .then(track => {
                clearHistory();
                const line = [];
                for (let i = 0; i + 2 < track.points.length; i += 3) line.push([track.points[i], track.points[i + 1]]);
                body.setAttribute("data-history-vehicle", track.vehicle);
                body.setAttribute("data-history-points", String(line.length));
                if (line.length === 0) { historyStatus.textContent = "No recorded fixes in that time."; return; }
                historyLayer = L.polyline(line, { color: "#639", weight: 3, opacity: 0.8, dashArray: "6 4", interactive: false })
                  .addTo(map);
                if (!follow.checked) map.fitBounds(historyLayer.getBounds().pad(0.1), { maxZoom: 17, animate: false });
                historyStatus.textContent = line.length + " fixes" + (track.truncated ? ", the first " + line.length + " only" : "");
              })
              .catch(err => { historyStatus.textContent = "Cannot load the track: " + err.message; });
          }

          if (config.history) {
            historyForm.hidden = false;
            const pad = n => String(n).padStart(2, "0");
            const local = d => d.getFullYear() + "-" + pad(d.getMonth() + 1) + "-" + pad(d.getDate()) + "T" +
              pad(d.getHours()) + ":" + pad(d.getMinutes());
            const now = Date.now();
            document.getElementById("history-since").value = local(new Date(now - 2 * 3600000));
            document.getElementById("history-until").value = local(new Date(now + 60000));
            historyForm.addEventListener("submit", e => { e.preventDefault(); showHistory(); });
            document.getElementById("history-clear").addEventListener("click", clearHistory);
          }

          // Trips and stops of the selected vehicle over the chosen range (/api/trips), and a
          // trip played back along its recorded fixes.
          const tripsList = document.getElementById("trips");
          const playbackBox = document.getElementById("playback");
          const playButton = document.getElementById("playback-play");
          const slider = document.getElementById("playback-time");
          let tripsLayer = null;
          let playback = null;

          function tooltip(text) {
            const span = document.createElement("span");
            span.textContent = text;
            return span;
          }
          const clock = t => new Date(t).toISOString().replace(".000Z", "Z");
          const duration = s => { s = Math.round(s); const m = Math.floor(s / 60); return Math.floor(m / 60) + ":" +
            String(m % 60).padStart(2, "0") + ":" + String(s % 60).padStart(2, "0"); };

          function stopPlayback() {
            if (playback && playback.timer) { clearInterval(playback.timer); playback.timer = null; }
            playButton.textContent = "Play";
            body.setAttribute("data-playback-state", "paused");
          }

          function clearTrips() {
            stopPlayback();
            if (playback) { playback.layer.remove(); playback = null; }
            if (tripsLayer) { tripsLayer.remove(); tripsLayer = null; }
            tripsList.replaceChildren();
            playbackBox.hidden = true;
            for (const name of ["data-trips", "data-stops", "data-playback-points", "data-playback-index", "data-playback-state"]) {
              body.removeAttribute(name);
            }
          }

          function range() {
            const since = new Date(document.getElementById("history-since").value);
            const until = new Date(document.getElementById("history-until").value);
            if (isNaN(since.getTime()) || isNaN(until.getTime()) || since >= until) return null;
            return "since=" + encodeURIComponent(since.toISOString()) + "&until=" + encodeURIComponent(until.toISOString());
          }

          function showTrips() {
            const times = range();
            if (!selected || !times) { historyStatus.textContent = "Choose a start before the end."; return; }
            historyStatus.textContent = "Loading…";
            fetch("/api/trips?vehicle=" + encodeURIComponent(selected) + "&" + times)
              .then(r => r.ok ? r.json() : r.text().then(t => { throw new Error(r.status + " " + t); }))
              .then(segments => {
                clearTrips();
                tripsLayer = L.layerGroup().addTo(map);
                let trips = 0, stops = 0;
                for (const s of segments) {
                  const li = document.createElement("li");
                  li.dataset.kind = s.kind;
                  const open = s.open ? " (open)" : "";
                  if (s.kind === "trip") {
                    trips++;
                    li.textContent = "Trip " + clock(s.start) + ", " + (s.distance_m / 1000).toFixed(2) + " km, " +
                      duration(s.duration_s) + open;
                    li.addEventListener("click", () => playTrip(s, li));
                  } else {
                    stops++;
                    const text = "Stop " + clock(s.start) + ", " + duration(s.duration_s) + open;
                    li.textContent = text;
                    L.circleMarker([s.lat, s.lon], { radius: 8, color: "#a50", weight: 2, fillOpacity: 0.4 })
                      .bindTooltip(tooltip(text)).addTo(tripsLayer);
                    li.addEventListener("click", () => map.panTo([s.lat, s.lon]));
                  }
                  tripsList.append(li);
                }
                body.setAttribute("data-trips", String(trips));
                body.setAttribute("data-stops", String(stops));
                historyStatus.textContent = trips + " trips, " + stops + " stops";
                if (stops > 0 && !follow.checked) {
                  const bounds = L.latLngBounds(segments.map(s => s.kind === "trip" ? [s.start_lat, s.start_lon] : [s.lat, s.lon]));
                  map.fitBounds(bounds.pad(0.3), { maxZoom: 16, animate: false });
                }
              })
              .catch(err => { historyStatus.textContent = "Cannot load the trips: " + err.message; });
          }

          function setPlayback(index) {
            if (!playback) return;
            const p = playback.points;
            const i = Math.max(0, Math.min(index, p.length - 1));
            playback.index = i;
            playback.marker.setLatLng(p[i]);
            slider.value = String(i);
            document.getElementById("playback-clock").textContent = clock(p[i][2]);
            body.setAttribute("data-playback-index", String(i));
          }

          function playTrip(trip, li) {
            const until = new Date(Date.parse(trip.end) + 1000).toISOString();
            fetch("/api/track?vehicle=" + encodeURIComponent(selected) + "&since=" + encodeURIComponent(trip.start) +
              "&until=" + encodeURIComponent(until))
              .then(r => r.ok ? r.json() : r.text().then(t => { throw new Error(r.status + " " + t); }))
              .then(track => {
                stopPlayback();
                if (playback) playback.layer.remove();
                for (const other of tripsList.children) other.classList.remove("playing");
                li.classList.add("playing");
                const points = [];
                for (let i = 0; i + 2 < track.points.length; i += 3) points.push([track.points[i], track.points[i + 1], track.points[i + 2]]);
                if (points.length === 0) { historyStatus.textContent = "No recorded fixes for that trip."; return; }
                const layer = L.layerGroup().addTo(map);
                const line = L.polyline(points.map(p => [p[0], p[1]]), { color: "#639", weight: 4, opacity: 0.8, interactive: false }).addTo(layer);
                const marker = L.circleMarker(points[0], { radius: 9, color: "#fff", weight: 3, fillColor: "#639", fillOpacity: 1 }).addTo(layer);
                playback = { points, index: 0, timer: null, layer, marker };
                slider.max = String(points.length - 1);
                playbackBox.hidden = false;
                body.setAttribute("data-playback-points", String(points.length));
                setPlayback(0);
                if (!follow.checked) map.fitBounds(line.getBounds().pad(0.1), { maxZoom: 17, animate: false });
              })
              .catch(err => { historyStatus.textContent = "Cannot load the trip: " + err.message; });
          }

          playButton.addEventListener("click", () => {
            if (!playback) return;
            if (playback.timer) { stopPlayback(); return; }
            if (playback.index >= playback.points.length - 1) setPlayback(0);
            // A trip plays in about 20 s, whatever its length.
            const step = Math.max(1, Math.round(playback.points.length / 400));
            playback.timer = setInterval(() => {
              setPlayback(playback.index + step);
              if (playback.index >= playback.points.length - 1) stopPlayback();
            }, 50);
            playButton.textContent = "Pause";
            body.setAttribute("data-playback-state", "playing");
          });
          slider.addEventListener("input", () => setPlayback(Number(slider.value)));

          if (config.history) {
            document.getElementById("history-trips").addEventListener("click", showTrips);
            document.getElementById("history-clear").addEventListener("click", clearTrips);
          } else {
            document.getElementById("history-trips").hidden = true;
          }

          // The fleet's zones (serve --zones), drawn under everything.
          if (config.zones) {
            fetch("/api/zones").then(r => r.json()).then(zones => {
              for (const z of zones) {
                const style = { color: "#2a7", weight: 2, fillOpacity: 0.12, interactive: true };
                const shape = z.circle ? L.circle([z.circle[0], z.circle[1]], Object.assign({ radius: z.circle[2] }, style))
                  : L.polygon(z.polygon, style);
                shape.bindTooltip(tooltip(z.name)).addTo(map);
              }
              body.setAttribute("data-zones", String(zones.length));
            });
          }

          function connection(state, text) {
            body.setAttribute("data-connection", state);
            document.getElementById("connection").textContent = text;
          }

          function connect() {
            const source = new EventSource("/events");
            source.addEventListener("open", () => connection("open", "live"));
            source.addEventListener("error", () => {
              // CONNECTING: the browser reconnects by itself. CLOSED (the server refused): retry.
              if (source.readyState === EventSource.CLOSED) {
                connection("closed", "disconnected");
                setTimeout(connect, 5000);
              } else {
                connection("connecting", "reconnecting…");
              }
            });
            source.addEventListener("snapshot", e => {
              apply(JSON.parse(e.data), true);
              body.setAttribute("data-snapshots", String(++snapshots));
            });
            source.addEventListener("update", e => {
              apply(JSON.parse(e.data), false);
              body.setAttribute("data-updates", String(++updates));
            });
          }
          connect();
        })();

        """#
}
