import FleetCore

/// The headers every response of the map carries (``SecurityHeadersHandler`` adds them), and the
/// Content Security Policy the page runs under.
///
/// The page loads its script (`/map.js`), its style (`/map.css`) and Leaflet (`/leaflet/…`, with
/// the images its style names) from this server, connects back to it only (`/events`,
/// `/api/track`) and draws the tiles of `--tiles` (and Leaflet's blank `data:` tile): the policy
/// allows exactly that, so markup that slipped into the page (an attribution is written with
/// `innerHTML` by Leaflet) runs no script and reaches no other server. It needs no
/// `'unsafe-inline'`: the page's one inline `<script>` is a JSON data block
/// (`type="application/json"`, read with `JSON.parse`, never executed, so `script-src` does not
/// apply to it), and the script and Leaflet style elements through the CSSOM (`element.style…`),
/// which `style-src` does not govern, never with `style` attributes or `<style>` elements.
package enum MapSecurityHeaders {
    /// `X-Content-Type-Options`: browsers take each response for its declared type, never for
    /// what its bytes look like.
    package static let contentTypeOptions = "nosniff"

    /// The policy for a page whose tiles come from `tiles` (a URL template; `nil`: no tiles).
    package static func contentSecurityPolicy(tiles: String?) -> String {
        // With tiles, `data:` too: Leaflet points a tile it aborts or removes (a zoom, a pan) at a
        // one-pixel GIF `data:` URL (`Util.emptyImageUrl`) to stop its download.
        let images = ["'self'"] + (tiles.map { ["data:", tileSource($0)] } ?? [])
        return [
            "default-src 'none'", "script-src 'self'", "style-src 'self'", "img-src \(images.joined(separator: " "))",
            "connect-src 'self'", "form-action 'self'", "base-uri 'none'", "frame-ancestors 'none'",
        ].joined(separator: "; ")
    }

    /// The source expression allowing the images of a tile URL template: its scheme, host and
    /// port (`https://tile.openstreetmap.org`); Leaflet's subdomain placeholder as a leftmost label
    /// becomes a wildcard (`https://{s}.tile.example` → `https://*.tile.example`). Anything a source
    /// expression cannot say exactly (a placeholder elsewhere in the host, user information, an
    /// IPv6 literal, a character outside a host name's) allows the scheme's images (`https:`), and
    /// can never add a directive of its own.
    package static func tileSource(_ template: String) -> String {
        let scheme = template.prefix { $0 != ":" }.lowercased()
        let schemeOnly = scheme == "http" ? "http:" : "https:"
        guard scheme == "http" || scheme == "https", template.dropFirst(scheme.count).hasPrefix("://") else { return schemeOnly }
        let authority = template.dropFirst(scheme.count + 3).prefix { !"/?#".contains($0) }
        var host = Substring(authority)
        var port: Substring?
        if let colon = authority.lastIndex(of: ":") {
            let digits = authority[authority.index(after: colon)...]
            guard !digits.isEmpty, digits.count <= 5, digits.allSatisfy(\.isASCIIDigit) else { return schemeOnly }
            host = authority[..<colon]
            port = digits
        }
        var wildcard = ""
        if host.hasPrefix("{s}.") {
            wildcard = "*."
            host = host.dropFirst(4)
        }
        let hostCharacters = host.utf8.allSatisfy {
            $0 == UInt8(ascii: "-") || $0 == UInt8(ascii: ".") || (0x30...0x39).contains($0) || (0x41...0x5A).contains($0)
                || (0x61...0x7A).contains($0)
        }
        guard !host.isEmpty, hostCharacters, !host.hasPrefix("."), !host.hasPrefix("-") else { return schemeOnly }
        return "\(scheme)://\(wildcard)\(host.lowercased())" + (port.map { ":\($0)" } ?? "")
    }
}

extension Character {
    fileprivate var isASCIIDigit: Bool { ("0"..."9").contains(self) }
}
