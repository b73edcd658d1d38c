import FleetCore

/// The live map page: its HTML, script and style, served by ``FleetMapServer`` at `/`,
/// `/map.js` and `/map.css`. They are files of their own (`Page/map.html`, `map.js`, `map.css`,
/// checked and edited as what they are) that the build embeds in the binary, so the binary is
/// the whole application (no resource bundle to install beside it); Leaflet itself comes from
/// Debian's `libjs-leaflet` at `/leaflet/`.
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
    /// Where `map.html` takes the page's configuration.
    static let configurationMarker = "{{configuration}}"

    /// The page, with `configuration` (see ``MapJSON/pageConfiguration(tiles:attribution:staleAfter:trailWindow:flushInterval:history:zones:)``,
    /// which writes no `<`) in the JSON script element the script reads.
    static func html(configuration: String) -> String {
        var page = String(decoding: PackageResources.map_html, as: UTF8.self)
        guard let marker = page.firstRange(of: configurationMarker) else { preconditionFailure("map.html has no \(configurationMarker)") }
        page.replaceSubrange(marker, with: configuration)
        return page
    }

    /// The page's style: online vehicles green, stale amber, offline grey, unknown blue.
    static var style: [UInt8] { PackageResources.map_css }

    /// The page's script (Leaflet 1.x API).
    static var script: [UInt8] { PackageResources.map_js }
}
