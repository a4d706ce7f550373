// The tenant's Ed25519 signatures in the browser (issue 29), with WebCrypto: no key leaves
// the browser. Two controls, wired here (no inline script: the pages' CSP forbids it):
//
// - [data-cosign]: a content to sign (its canonical JSON in the json_script named by
//   data-canonical-id). The user picks a private key file (PKCS#8 PEM, as gpulease-verify
//   keygen and openssl genpkey write it); the base64 signature goes into the input named by
//   data-signature-id. [data-fallback] (the command line) shows where WebCrypto has no
//   Ed25519.
// - [data-keygen]: generates a key pair, asks the API for its registration content
//   (data-content-url), signs it, registers the key (data-register-url) and offers the
//   private key for download, once.
(function () {
  "use strict";

  var supported = null;

  function ed25519() {
    if (supported === null) {
      supported = window.crypto && crypto.subtle
        ? crypto.subtle
            .generateKey({ name: "Ed25519" }, false, ["sign", "verify"])
            .then(function () { return true; }, function () { return false; })
        : Promise.resolve(false);
    }
    return supported;
  }

  function toBase64(buffer) {
    var bytes = new Uint8Array(buffer);
    var text = "";
    for (var i = 0; i < bytes.length; i++) text += String.fromCharCode(bytes[i]);
    return btoa(text);
  }

  function fromPem(pem) {
    var body = pem.replace(/-----(BEGIN|END) [A-Z ]+-----/g, "").replace(/\s+/g, "");
    var text = atob(body);
    var bytes = new Uint8Array(text.length);
    for (var i = 0; i < text.length; i++) bytes[i] = text.charCodeAt(i);
    return bytes.buffer;
  }

  function toPem(buffer) {
    var lines = toBase64(buffer).match(/.{1,64}/g).join("\n");
    return "-----BEGIN PRIVATE KEY-----\n" + lines + "\n-----END PRIVATE KEY-----\n";
  }

  function sign(privateKey, text) {
    return crypto.subtle
      .sign({ name: "Ed25519" }, privateKey, new TextEncoder().encode(text))
      .then(toBase64);
  }

  function csrfToken() {
    var input = document.querySelector("input[name=csrfmiddlewaretoken]");
    return input ? input.value : "";
  }

  function postJson(url, body) {
    return fetch(url, {
      method: "POST",
      credentials: "same-origin",
      headers: {
        "Content-Type": "application/json",
        "Accept": "application/json",
        "X-CSRFToken": csrfToken(),
      },
      body: JSON.stringify(body),
    }).then(function (response) {
      return response.json().then(function (data) {
        if (!response.ok) {
          var error = (data && data.error) || {};
          throw new Error(error.message || String(response.status));
        }
        return data;
      });
    });
  }

  function cosign(section) {
    var status = section.querySelector("[data-cosign-status]");
    var canonical = JSON.parse(
      document.getElementById(section.getAttribute("data-canonical-id")).textContent
    );
    var target = document.getElementById(section.getAttribute("data-signature-id"));
    var file = section.querySelector("[data-key-file]");
    var button = section.querySelector("[data-sign]");
    ed25519().then(function (ok) {
      if (!ok) return;
      section.querySelector("[data-webcrypto]").hidden = false;
      section.querySelector("[data-fallback]").hidden = true;
    });
    button.addEventListener("click", function () {
      if (!file.files.length) {
        status.textContent = section.getAttribute("data-no-file") || "Choose your private key file first.";
        return;
      }
      file.files[0]
        .text()
        .then(function (pem) {
          return crypto.subtle.importKey("pkcs8", fromPem(pem), { name: "Ed25519" }, false, ["sign"]);
        })
        .then(function (key) { return sign(key, canonical); })
        .then(function (signature) {
          target.value = signature;
          status.textContent = section.getAttribute("data-signed") || "Signed.";
        })
        .catch(function (error) {
          status.textContent = (section.getAttribute("data-failed") || "Could not sign:") + " " + error.message;
        });
    });
  }

  function keygen(box) {
    var status = box.querySelector("[data-keygen-status]");
    var download = box.querySelector("[data-keygen-download]");
    var link = download.querySelector("a");
    ed25519().then(function (ok) { box.hidden = !ok; });
    box.querySelector("[data-keygen-run]").addEventListener("click", function () {
      var tenant = box.getAttribute("data-tenant");
      var label = box.querySelector("[data-keygen-label]").value;
      var pair, publicKey;
      status.textContent = "…";
      crypto.subtle
        .generateKey({ name: "Ed25519" }, true, ["sign", "verify"])
        .then(function (generated) {
          pair = generated;
          return crypto.subtle.exportKey("raw", pair.publicKey);
        })
        .then(function (raw) {
          publicKey = toBase64(raw);
          return postJson(box.getAttribute("data-content-url"), { tenant: tenant, public_key: publicKey });
        })
        .then(function (answer) {
          return sign(pair.privateKey, answer.canonical).then(function (signature) {
            return postJson(box.getAttribute("data-register-url"), {
              tenant: tenant,
              public_key: publicKey,
              signed_at: answer.signed_at,
              signature: signature,
              label: label,
            });
          });
        })
        .then(function (key) {
          status.textContent = (box.getAttribute("data-registered") || "Registered:") + " " + key.fingerprint;
          status.setAttribute("data-fingerprint", key.fingerprint);
          return crypto.subtle.exportKey("pkcs8", pair.privateKey);
        })
        .then(function (pkcs8) {
          var url = URL.createObjectURL(new Blob([toPem(pkcs8)], { type: "application/x-pem-file" }));
          link.href = url;
          download.hidden = false;
          link.addEventListener("click", function () {
            // Offered once: the object URL goes once the download has started.
            setTimeout(function () {
              URL.revokeObjectURL(url);
              download.hidden = true;
            }, 1000);
          }, { once: true });
        })
        .catch(function (error) {
          status.textContent = (box.getAttribute("data-failed") || "Could not register:") + " " + error.message;
        });
    });
  }

  document.addEventListener("DOMContentLoaded", function () {
    document.querySelectorAll("[data-cosign]").forEach(cosign);
    document.querySelectorAll("[data-keygen]").forEach(keygen);
  });
})();
