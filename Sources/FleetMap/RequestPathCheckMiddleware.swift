import FleetCore
import Hummingbird

/// Answers 400 to a request whose path holds a NUL, raw or as `%00`: no file, route or log line
/// has a use for one, and a decoded NUL cut short where a C call reads the path (Leaflet's
/// `/leaflet/leaflet.js%00.txt` was served as `leaflet.js`, typed as text). Hummingbird's parser
/// already refuses a raw NUL with its own 400; this refuses whatever reaches the router.
package struct RequestPathCheckMiddleware<Context: RequestContext>: RouterMiddleware {
    package func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        guard !Self.hasNUL(request.uri.path) else {
            return Response(
                status: .badRequest, headers: [.contentType: "text/plain; charset=utf-8"],
                body: ResponseBody(byteBuffer: ByteBuffer(string: "The request path holds a NUL.\n")))
        }
        return try await next(request, context)
    }

    /// Whether `path` holds a NUL, raw or percent-encoded.
    package static func hasNUL(_ path: String) -> Bool {
        path.utf8.contains(0) || path.contains("%00")
    }
}
