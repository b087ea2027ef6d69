"""The checks that find issues, with their words in each language.

Issue texts are not stored per issue: they are rendered from the check and the issue's location in the
caller's language, which keeps a 50,000-issue world small and makes the language a pure view concern.
"""

from __future__ import annotations

from dataclasses import dataclass

FAMILIES = ("database", "secrets", "exposedFiles", "personalData", "vulnerableVersions", "configuration",
            "compliance", "server", "code")
SEVERITIES = ("critical", "high", "medium", "low", "info")
SEVERITY_RANK = {s: i for i, s in enumerate(SEVERITIES)}
CONFIDENCES = ("confirmed", "likely", "estimated")
ISSUE_STATUSES = ("open", "fixed", "false_positive", "accepted_risk")


@dataclass(frozen=True, slots=True)
class Control:
    id: str
    family: str
    kind: str  # "domain" or "repository": the target kind the check runs on
    severity: str
    confidence: str
    en: tuple[str, str, str]  # title, explanation, detail (detail may use {location})
    fr: tuple[str, str, str]
    locations: tuple[str, ...]


def _c(cid: str, family: str, kind: str, sev: str, conf: str, en: tuple[str, str, str], fr: tuple[str, str, str],
       locations: tuple[str, ...]) -> Control:
    return Control(cid, family, kind, sev, conf, en, fr, locations)


CONTROLS: tuple[Control, ...] = (
    _c("db.public_table_read", "database", "domain", "critical", "confirmed",
       ("Database table readable without login", "Anyone can read this table without signing in.",
        "An anonymous read of {location} returned rows."),
       ("Table de base de données lisible sans connexion", "N'importe qui peut lire cette table sans se connecter.",
        "Une lecture anonyme de {location} a renvoyé des lignes."),
       ("table:users", "table:orders", "table:profiles", "table:invoices")),
    _c("db.public_table_write", "database", "domain", "critical", "likely",
       ("Database table writable without login", "Anyone could change or delete this data.",
        "The access policy of {location} allows anonymous writes."),
       ("Table modifiable sans connexion", "N'importe qui pourrait modifier ou effacer ces données.",
        "La politique d'accès de {location} permet l'écriture anonyme."),
       ("table:comments", "table:settings", "table:uploads")),
    _c("db.admin_console", "database", "domain", "high", "likely",
       ("Database console reachable from the internet", "An administration console is exposed to everyone.",
        "A database console answered at {location}."),
       ("Console de base de données accessible depuis Internet", "Une console d'administration est exposée à tous.",
        "Une console de base de données a répondu sur {location}."),
       ("/phpmyadmin/", "/adminer.php", "/pgadmin/")),
    _c("secrets.api_key_in_js", "secrets", "domain", "critical", "confirmed",
       ("Secret key in public JavaScript", "A private key is shipped to every visitor's browser.",
        "A key matching a provider pattern was found in {location}."),
       ("Clé secrète dans du JavaScript public", "Une clé privée est envoyée au navigateur de chaque visiteur.",
        "Une clé correspondant au format d'un fournisseur a été trouvée dans {location}."),
       ("/static/js/main.js", "/assets/app.js", "/bundle.js")),
    _c("secrets.token_in_html", "secrets", "domain", "high", "likely",
       ("Access token in page source", "A token that grants access is visible in the page.",
        "A bearer token appears in the HTML of {location}."),
       ("Jeton d'accès dans le source de la page", "Un jeton donnant accès est visible dans la page.",
        "Un jeton apparaît dans le HTML de {location}."),
       ("/", "/login", "/dashboard")),
    _c("files.env_exposed", "exposedFiles", "domain", "critical", "confirmed",
       ("Environment file downloadable", "Passwords and keys of the site can be downloaded.",
        "{location} is served with status 200."),
       ("Fichier d'environnement téléchargeable", "Les mots de passe et clés du site peuvent être téléchargés.",
        "{location} est servi avec le statut 200."),
       ("/.env", "/.env.production", "/config/.env")),
    _c("files.git_exposed", "exposedFiles", "domain", "high", "confirmed",
       ("Source control folder exposed", "The site's source code history can be downloaded.",
        "{location} is readable."),
       ("Dossier de gestion de versions exposé", "L'historique du code source du site peut être téléchargé.",
        "{location} est lisible."),
       ("/.git/HEAD", "/.git/config")),
    _c("files.backup_exposed", "exposedFiles", "domain", "medium", "likely",
       ("Backup file downloadable", "An old copy of the site or database is public.",
        "A backup archive answered at {location}."),
       ("Fichier de sauvegarde téléchargeable", "Une ancienne copie du site ou de la base est publique.",
        "Une archive de sauvegarde a répondu sur {location}."),
       ("/backup.zip", "/db.sql", "/site.tar.gz")),
    _c("pii.emails_listed", "personalData", "domain", "high", "likely",
       ("Personal data listed publicly", "Customer e-mail addresses can be collected by anyone.",
        "{location} lists e-mail addresses."),
       ("Données personnelles listées publiquement", "Les adresses e-mail des clients peuvent être collectées.",
        "{location} liste des adresses e-mail."),
       ("/api/users", "/members", "/export.csv")),
    _c("pii.no_consent", "personalData", "domain", "low", "estimated",
       ("Tracking before consent", "Visitors are tracked before they agree.",
        "Third-party cookies are set on {location} before consent."),
       ("Pistage avant consentement", "Les visiteurs sont pistés avant d'avoir accepté.",
        "Des cookies tiers sont posés sur {location} avant le consentement."),
       ("/", "/shop")),
    _c("vuln.jquery_old", "vulnerableVersions", "domain", "medium", "confirmed",
       ("Outdated JavaScript library", "A library with known flaws is loaded.",
        "jQuery 1.12.4 is loaded from {location}."),
       ("Bibliothèque JavaScript obsolète", "Une bibliothèque aux failles connues est chargée.",
        "jQuery 1.12.4 est chargé depuis {location}."),
       ("/js/jquery.min.js", "/vendor/jquery.js")),
    _c("vuln.cms_outdated", "vulnerableVersions", "domain", "high", "likely",
       ("Outdated CMS version", "The site runs a version with published attacks.",
        "The generator tag of {location} names a version with known vulnerabilities."),
       ("Version de CMS obsolète", "Le site utilise une version aux attaques publiées.",
        "La balise generator de {location} indique une version vulnérable."),
       ("/", "/wp-login.php")),
    _c("vuln.server_eol", "vulnerableVersions", "domain", "medium", "estimated",
       ("Server software past end of life", "It no longer receives security fixes.",
        "The Server header of {location} names an unsupported release."),
       ("Logiciel serveur en fin de vie", "Il ne reçoit plus de correctifs de sécurité.",
        "L'en-tête Server de {location} indique une version non maintenue."),
       ("/",)),
    _c("config.hsts_missing", "configuration", "domain", "low", "confirmed",
       ("HTTPS not enforced (HSTS missing)", "Visitors can be downgraded to an unencrypted connection.",
        "No Strict-Transport-Security header on {location}."),
       ("HTTPS non imposé (HSTS absent)", "Les visiteurs peuvent être ramenés vers une connexion non chiffrée.",
        "Pas d'en-tête Strict-Transport-Security sur {location}."),
       ("/",)),
    _c("config.csp_missing", "configuration", "domain", "medium", "confirmed",
       ("No Content Security Policy", "Injected scripts would run without restriction.",
        "No Content-Security-Policy header on {location}."),
       ("Pas de politique de sécurité du contenu", "Des scripts injectés s'exécuteraient sans restriction.",
        "Pas d'en-tête Content-Security-Policy sur {location}."),
       ("/", "/app")),
    _c("config.cookie_flags", "configuration", "domain", "low", "confirmed",
       ("Session cookie without Secure or HttpOnly", "The session could be stolen more easily.",
        "The session cookie set by {location} lacks Secure or HttpOnly."),
       ("Cookie de session sans Secure ou HttpOnly", "La session pourrait être volée plus facilement.",
        "Le cookie de session posé par {location} n'a pas Secure ou HttpOnly."),
       ("/login", "/")),
    _c("config.cors_wildcard", "configuration", "domain", "medium", "likely",
       ("API open to every origin", "Any web site can call this API with the visitor's rights.",
        "{location} answers Access-Control-Allow-Origin: * with credentials."),
       ("API ouverte à toutes les origines", "N'importe quel site peut appeler cette API avec les droits du visiteur.",
        "{location} répond Access-Control-Allow-Origin: * avec des identifiants."),
       ("/api/", "/graphql")),
    _c("config.directory_listing", "configuration", "domain", "low", "confirmed",
       ("Directory listing enabled", "Visitors can browse the site's files.",
        "{location} shows an index of files."),
       ("Listage de répertoire activé", "Les visiteurs peuvent parcourir les fichiers du site.",
        "{location} affiche un index des fichiers."),
       ("/uploads/", "/static/")),
    _c("compliance.privacy_policy", "compliance", "domain", "info", "estimated",
       ("No privacy policy found", "Visitors are not told how their data is used.",
        "No privacy policy link was found on {location}."),
       ("Aucune politique de confidentialité", "Les visiteurs ne savent pas comment leurs données sont utilisées.",
        "Aucun lien de politique de confidentialité trouvé sur {location}."),
       ("/",)),
    _c("compliance.legal_notice", "compliance", "domain", "info", "estimated",
       ("No legal notice found", "The publisher of the site is not identified.",
        "No legal notice was found on {location}."),
       ("Aucunes mentions légales", "L'éditeur du site n'est pas identifié.",
        "Aucunes mentions légales trouvées sur {location}."),
       ("/",)),
    _c("server.tls_old", "server", "domain", "medium", "confirmed",
       ("Old TLS versions accepted", "Connections can use broken encryption.",
        "TLS 1.0 is accepted on {location}."),
       ("Anciennes versions de TLS acceptées", "Les connexions peuvent utiliser un chiffrement cassé.",
        "TLS 1.0 est accepté sur {location}."),
       ("port:443",)),
    _c("server.cert_expiring", "server", "domain", "high", "confirmed",
       ("Certificate expires soon", "Visitors will soon see a security warning.",
        "The certificate served on {location} expires in less than 14 days."),
       ("Certificat bientôt expiré", "Les visiteurs verront bientôt un avertissement de sécurité.",
        "Le certificat servi sur {location} expire dans moins de 14 jours."),
       ("port:443",)),
    _c("server.open_port", "server", "domain", "medium", "likely",
       ("Unexpected service open to the internet", "A service meant to stay private is reachable.",
        "{location} accepts connections."),
       ("Service inattendu ouvert sur Internet", "Un service censé rester privé est joignable.",
        "{location} accepte des connexions."),
       ("port:6379", "port:9200", "port:27017")),
    _c("server.info_leak", "server", "domain", "info", "confirmed",
       ("Server version disclosed", "Attackers learn which software to target.",
        "The response headers of {location} reveal the software version."),
       ("Version du serveur divulguée", "Les attaquants savent quel logiciel viser.",
        "Les en-têtes de réponse de {location} révèlent la version du logiciel."),
       ("/",)),
    _c("code.sql_injection", "code", "repository", "critical", "likely",
       ("SQL built from user input", "An attacker could read or change the database.",
        "User input reaches a SQL string at {location}."),
       ("SQL construit à partir d'une saisie", "Un attaquant pourrait lire ou modifier la base.",
        "Une saisie utilisateur atteint une chaîne SQL en {location}."),
       ("src/db/query.py:42", "api/search.ts:118", "app/models.rb:77")),
    _c("code.hardcoded_secret", "secrets", "repository", "critical", "confirmed",
       ("Secret committed to the repository", "Everyone with read access holds this secret.",
        "A credential literal is committed at {location}."),
       ("Secret enregistré dans le dépôt", "Toute personne ayant accès au dépôt détient ce secret.",
        "Un identifiant en clair est enregistré en {location}."),
       ("config/settings.py:12", "deploy/values.yaml:30", ".github/workflows/ci.yml:19")),
    _c("code.xss", "code", "repository", "high", "likely",
       ("Unescaped output in a page", "Injected scripts could run in visitors' browsers.",
        "Unescaped user input is rendered at {location}."),
       ("Sortie non échappée dans une page", "Des scripts injectés pourraient s'exécuter chez les visiteurs.",
        "Une saisie non échappée est affichée en {location}."),
       ("templates/profile.html:8", "src/components/Comment.tsx:21")),
    _c("code.weak_hash", "code", "repository", "medium", "confirmed",
       ("Weak password hashing", "Stolen passwords would be easy to crack.",
        "MD5 or SHA-1 is used for passwords at {location}."),
       ("Hachage de mot de passe faible", "Des mots de passe volés seraient faciles à casser.",
        "MD5 ou SHA-1 sert aux mots de passe en {location}."),
       ("src/auth/hash.py:5", "lib/users.js:64")),
    _c("code.vulnerable_dependency", "vulnerableVersions", "repository", "high", "confirmed",
       ("Dependency with a known vulnerability", "A library in use has a published flaw.",
        "The lock file pins a vulnerable version at {location}."),
       ("Dépendance à vulnérabilité connue", "Une bibliothèque utilisée a une faille publiée.",
        "Le fichier de verrouillage fixe une version vulnérable en {location}."),
       ("package-lock.json:2210", "poetry.lock:415", "go.sum:88")),
    _c("code.debug_enabled", "configuration", "repository", "low", "likely",
       ("Debug mode enabled in production settings", "Errors would reveal internals to visitors.",
        "DEBUG is true at {location}."),
       ("Mode débogage actif en production", "Les erreurs révéleraient des détails internes.",
        "DEBUG vaut true en {location}."),
       ("settings/prod.py:3", "config/production.json:7")),
    _c("code.todo_security", "code", "repository", "info", "estimated",
       ("Security TODO left in code", "A known weakness was postponed.",
        "A TODO mentioning authentication is left at {location}."),
       ("TODO de sécurité laissé dans le code", "Une faiblesse connue a été repoussée.",
        "Un TODO mentionnant l'authentification est resté en {location}."),
       ("src/auth/session.py:140", "server/routes.go:51")),
)

BY_ID = {c.id: c for c in CONTROLS}
DOMAIN_CONTROLS = tuple(c for c in CONTROLS if c.kind == "domain")
REPOSITORY_CONTROLS = tuple(c for c in CONTROLS if c.kind == "repository")


def texts(control_id: str, location: str, lang: str) -> tuple[str, str, str]:
    """Title, explanation and detail of an issue in `lang` (English when the language is unknown)."""
    c = BY_ID[control_id]
    title, explanation, detail = c.fr if lang == "fr" else c.en
    return title, explanation, detail.format(location=location)
