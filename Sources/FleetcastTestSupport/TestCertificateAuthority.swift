import Foundation

/// A throw-away certificate authority made with `openssl` in a test's directory: EC P-256 keys,
/// valid for 2 days. It issues server certificates (with subject alternative names) and client
/// certificates, whose common name is the client's identity (mosquitto's
/// `use_identity_as_username`).
public struct TestCertificateAuthority: Sendable {
    /// A certificate and its private key, both PEM files.
    public struct Issued: Sendable {
        /// The certificate.
        public let certificateFile: String
        /// Its private key (unencrypted).
        public let keyFile: String
    }

    /// The CA's own certificate (PEM): what clients and brokers are told to trust.
    public let certificateFile: String
    private let keyFile: String
    private let directory: String

    private static let newKey = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]

    /// Makes a self-signed CA with the common name `Fleetcast test {name}`; its files are
    /// `name.crt` and `name.key` in `directory`.
    public static func make(named name: String = "ca", in directory: String) async throws -> TestCertificateAuthority {
        let certificate = "\(directory)/\(name).crt", key = "\(directory)/\(name).key"
        try await TestBroker.runTool(
            "/usr/bin/openssl",
            ["req", "-x509"] + newKey + [
                "-keyout", key, "-out", certificate, "-days", "2", "-subj", "/CN=Fleetcast test \(name)",
            ], in: directory)
        return TestCertificateAuthority(certificateFile: certificate, keyFile: key, directory: directory)
    }

    /// Issues a certificate for `commonName`, signed by this CA, with the subject alternative
    /// names given (`["DNS:localhost", "IP:127.0.0.1"]` for a broker; none for a client). Its
    /// files are `fileName.crt` and `fileName.key` (`fileName` defaults to `commonName`).
    /// Safe to call concurrently: each certificate gets a random serial number (no `.srl` file).
    public func issue(commonName: String, subjectAltNames: [String] = [], fileName: String? = nil) async throws -> Issued {
        let stem = "\(directory)/\(fileName ?? commonName)"
        try await TestBroker.runTool(
            "/usr/bin/openssl",
            ["req"] + Self.newKey + [
                // openssl reads '+' in -subj as the start of another attribute unless escaped.
                "-keyout", "\(stem).key", "-out", "\(stem).csr", "-subj",
                "/CN=\(commonName.replacingOccurrences(of: "+", with: "\\+"))",
            ], in: directory)
        var extensions: [String] = []
        if !subjectAltNames.isEmpty {
            try "subjectAltName=\(subjectAltNames.joined(separator: ","))\n"
                .write(toFile: "\(stem).ext", atomically: true, encoding: .utf8)
            extensions = ["-extfile", "\(stem).ext"]
        }
        let serial = "0x" + UUID().uuidString.replacingOccurrences(of: "-", with: "").prefix(16)
        try await TestBroker.runTool(
            "/usr/bin/openssl",
            [
                "x509", "-req", "-in", "\(stem).csr", "-CA", certificateFile, "-CAkey", keyFile,
                "-set_serial", serial, "-out", "\(stem).crt", "-days", "2",
            ] + extensions, in: directory)
        return Issued(certificateFile: "\(stem).crt", keyFile: "\(stem).key")
    }
}
