// The parts of the system's OpenSSL (1.1.1 or 3.x) that HoardRedis uses for rediss:// on Linux,
// with the macros Swift cannot call wrapped as functions. Without OpenSSL's headers (a build
// without the TLS trait on a machine without libssl-dev, or an Apple platform), it is empty.
#ifndef HOARD_COPENSSL_SHIM_H
#define HOARD_COPENSSL_SHIM_H

#if __has_include(<openssl/ssl.h>)

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

static inline long hoard_SSL_set_tlsext_host_name(SSL *ssl, const char *name) {
    return SSL_set_tlsext_host_name(ssl, name);
}

static inline int hoard_SSL_CTX_set_min_proto_version(SSL_CTX *context, int version) {
    return (int)SSL_CTX_set_min_proto_version(context, version);
}

static inline long hoard_BIO_pending(BIO *bio) {
    return (long)BIO_pending(bio);
}

static inline void hoard_BIO_set_mem_eof_return(BIO *bio, int value) {
    BIO_set_mem_eof_return(bio, value);
}

// Called by OpenSSL when the server asks for a client certificate and none is set: notes the
// request in the session's application data (ex_data slot 0) and sends none.
static inline int hoard_note_certificate_request(SSL *ssl, X509 **certificate, EVP_PKEY **key) {
    (void)certificate;
    (void)key;
    SSL_set_ex_data(ssl, 0, (void *)1);
    return 0;
}

static inline void hoard_SSL_CTX_note_certificate_requests(SSL_CTX *context) {
    SSL_CTX_set_client_cert_cb(context, hoard_note_certificate_request);
}

static inline int hoard_SSL_was_asked_for_certificate(const SSL *ssl) {
    return SSL_get_ex_data(ssl, 0) != NULL;
}

#endif  // __has_include(<openssl/ssl.h>)

#endif
