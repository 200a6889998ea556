// The parts of the system's OpenSSL (1.1.1 or 3.x) that HoardRedis uses for rediss:// on Linux,
// with the macros Swift cannot call wrapped as functions. Without OpenSSL's headers (a build
// without the TLS trait on a machine without libssl-dev, or an Apple platform), it is empty.
#ifndef HOARD_COPENSSL_SHIM_H
#define HOARD_COPENSSL_SHIM_H

#if __has_include(<openssl/ssl.h>)

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/pkcs12.h>
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

// Loads the certificate, its chain and its key from a PKCS #12 file (DER) into the context.
// Returns 1 on success, 0 when the file cannot be read or parsed (a wrong password included) or its
// key does not match its certificate; OpenSSL's error queue says why.
static inline int hoard_SSL_CTX_use_PKCS12_file(SSL_CTX *context, const char *path, const char *password) {
    FILE *file = fopen(path, "rb");
    if (file == NULL) {
        return 0;
    }
    PKCS12 *bundle = d2i_PKCS12_fp(file, NULL);
    fclose(file);
    if (bundle == NULL) {
        return 0;
    }
    EVP_PKEY *key = NULL;
    X509 *certificate = NULL;
    STACK_OF(X509) *chain = NULL;
    int loaded = PKCS12_parse(bundle, password, &key, &certificate, &chain);
    PKCS12_free(bundle);
    if (loaded) {
        loaded = certificate != NULL && key != NULL && SSL_CTX_use_certificate(context, certificate) == 1
            && SSL_CTX_use_PrivateKey(context, key) == 1 && SSL_CTX_check_private_key(context) == 1;
    }
    for (int index = 0; loaded && chain != NULL && index < sk_X509_num(chain); index++) {
        loaded = SSL_CTX_add1_chain_cert(context, sk_X509_value(chain, index)) == 1;
    }
    X509_free(certificate);
    EVP_PKEY_free(key);
    sk_X509_pop_free(chain, X509_free);
    return loaded;
}

#endif  // __has_include(<openssl/ssl.h>)

#endif
