// Package tlsconfig builds the server side of a Kafka listener's TLS from
// Kafka's ssl.* keys (SPEC §14, TLS): a PEM keystore (private key and
// certificate chain, in one file or inline), a PEM truststore for client
// certificates, ssl.client.auth and ssl.enabled.protocols (TLS 1.2 and
// later only). Files are read again when they change, so certificates
// rotate without a restart: the check runs on a handshake, at most once a
// second, and files that do not load keep the previous certificates (and
// are logged once) until they change again and load. It also maps a
// client certificate to a principal: the subject's distinguished name in
// RFC 2253 form, rewritten by ssl.principal.mapping.rules.
package tlsconfig
