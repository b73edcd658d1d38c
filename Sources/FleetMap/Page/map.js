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
