import FleetCore
import FleetcastCore
import HTTPTypes
import Hummingbird
import HummingbirdAuth
import Logging

/// The failed authentications of every client of one server (``AuthenticationFailureBuckets``
/// under a lock), on the monotonic clock.
final class AuthenticationThrottle: Sendable {
    private let buckets: SanitizerVisibleMutex<AuthenticationFailureBuckets>

    init(limits: AuthenticationFailureBuckets.Limits) {
        buckets = SanitizerVisibleMutex(AuthenticationFailureBuckets(limits: limits))
    }

    /// Whether `client`'s credentials may be checked now.
    func admit(_ client: String) -> AuthenticationFailureBuckets.Admission {
        let now = ContinuousClock.now
        return buckets.withLock { $0.admit(client, now: now) }
    }

    /// `client`'s credentials were wrong.
    func failed(_ client: String) {
        let now = ContinuousClock.now
        buckets.withLock { $0.failed(client, now: now) }
    }
}

/// Lets a request through once its credentials name a user (basic, against ``MapUsers``) or a
/// token (bearer, ``MapTokens``); otherwise 401 with the challenges a browser (basic) and a script
/// (bearer) understand. A request without credentials costs nothing and is not counted; wrong
/// credentials count against the client's address (``AuthenticationThrottle``), and a client over
/// its limit gets 429 with `Retry-After` at once, its credentials unchecked (no bcrypt run): a
/// client guessing passwords in parallel cannot take the bcrypt threads from everyone else.
///
/// Each client's first refusal of an episode is logged at info with its address (one line per
/// guessing client, for an operator or fail2ban), later ones at debug; wrong credentials at debug.
struct MapAuthenticationMiddleware: RouterMiddleware {
    typealias Context = MapRequestContext

    /// The users file's users; `nil` without one.
    let users: MapUsers?
    /// The bearer tokens; `nil` without any.
    let tokens: MapTokens?
    let throttle: AuthenticationThrottle
    let logger: Logger

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        guard request.headers[.authorization] != nil else { return challenge() }
        switch throttle.admit(context.client) {
        case .check:
            break
        case .refuse(let seconds, let first):
            logger.log(
                level: first ? .info : .debug, "Refused to check the credentials of a client that failed too often",
                metadata: ["http.peer": "\(context.peer)", "http.retry_after_seconds": "\(seconds)"])
            return Response(
                status: .tooManyRequests, headers: [.contentType: "text/plain; charset=utf-8", .retryAfter: "\(seconds)"],
                body: ResponseBody(byteBuffer: ByteBuffer(string: "Too many failed authentications; try again in \(seconds) s.\n")))
        }
        guard let user = try await authenticate(request) else {
            throttle.failed(context.client)
            logger.debug("Refused a request's credentials", metadata: ["http.peer": "\(context.peer)"])
            return challenge()
        }
        var context = context
        context.identity = user
        return try await next(request, context)
    }

    /// The user `request`'s credentials name, `nil` when they are wrong or of a kind not asked for.
    func authenticate(_ request: Request) async throws -> MapUser? {
        if let users, let basic = request.headers.basic {
            return try await users.verify(name: basic.username, password: basic.password) ? MapUser(name: basic.username) : nil
        }
        if let tokens, let bearer = request.headers.bearer {
            return tokens.matches(bearer.token) ? MapUser(name: "token") : nil
        }
        return nil
    }

    /// 401 with the challenges of the kinds of credentials asked for.
    func challenge() -> Response {
        var headers: HTTPFields = [.contentType: "text/plain; charset=utf-8"]
        if users != nil { headers.append(HTTPField(name: .wwwAuthenticate, value: #"Basic realm="fleet-watch", charset="UTF-8""#)) }
        if tokens != nil { headers.append(HTTPField(name: .wwwAuthenticate, value: #"Bearer realm="fleet-watch""#)) }
        return Response(
            status: .unauthorized, headers: headers, body: ResponseBody(byteBuffer: ByteBuffer(string: "Authentication required.\n")))
    }
}
