"""Texts in the key owner's language: error messages and the words of each check.

The contract says `message` and the issue texts follow the owner's language; a client that keys its
logic on a message instead of `code` breaks as soon as a French key answers, which the tests exercise.
"""

from __future__ import annotations

MESSAGES: dict[str, tuple[str, str]] = {
    "body_invalid": ("The request body is not valid JSON or is malformed.",
                     "Le corps de la requête n'est pas du JSON valide ou est mal formé."),
    "parameter_invalid": ("The parameter '{param}' is missing or invalid.",
                          "Le paramètre « {param} » est manquant ou invalide."),
    "cursor_invalid": ("starting_after is not the id of an item of this list.",
                       "starting_after n'est pas l'identifiant d'un élément de cette liste."),
    "url_invalid": ("The submitted address is not valid.", "L'adresse fournie n'est pas valide."),
    "url_private": ("The submitted address is private.", "L'adresse fournie est privée."),
    "idempotency_key_invalid": ("The Idempotency-Key must be 1 to 255 printable ASCII characters.",
                                "L'Idempotency-Key doit compter 1 à 255 caractères ASCII imprimables."),
    "target_kind_invalid": ("The requested scan kind does not fit this target.",
                            "Le type d'analyse demandé ne convient pas à cette cible."),
    "reason_required": ("A reason of 10 to 500 characters is required for this status.",
                        "Une raison de 10 à 500 caractères est requise pour ce statut."),
    "authentication_required": ("No credential: send 'Authorization: Bearer <API_KEY>'.",
                                "Aucun identifiant : envoyez « Authorization: Bearer <API_KEY> »."),
    "invalid_api_key": ("The credential is wrong, revoked or expired.",
                        "L'identifiant est erroné, révoqué ou expiré."),
    "api_plan_required": ("The API is available on the Pro plan or during the Solo trial.",
                          "L'API est disponible avec l'offre Pro ou pendant l'essai Solo."),
    "api_trial_ended": ("The 14-day Solo trial is over; moving to Pro restores keys at once.",
                        "L'essai Solo de 14 jours est terminé ; passer à Pro rétablit les clés aussitôt."),
    "project_limit_reached": ("The plan's number of projects is reached.",
                              "Le nombre de projets de l'offre est atteint."),
    "address_limit_reached": ("The plan's number of addresses per project is reached.",
                              "Le nombre d'adresses par projet de l'offre est atteint."),
    "domain_taken": ("This domain is followed by another free account.",
                     "Ce domaine est suivi par un autre compte gratuit."),
    "project_paused": ("The project is paused.", "Le projet est en pause."),
    "audit_not_in_plan": ("The plan has no full audit.", "L'offre n'inclut pas l'audit complet."),
    "repositories_not_in_plan": ("The plan has no repositories.", "L'offre n'inclut pas les dépôts."),
    "scan_quota_exceeded": ("The period's scan quota and pack credits are used up.",
                            "Le quota d'analyses de la période et les crédits de pack sont épuisés."),
    "audit_quota_exceeded": ("The period's audit quota and pack credits are used up.",
                             "Le quota d'audits de la période et les crédits de pack sont épuisés."),
    "fix_quota_exceeded": ("The fix quota and pack credits are used up.",
                           "Le quota de correctifs et les crédits de pack sont épuisés."),
    "scope_missing": ("The token lacks the scope '{scope}' needed by this route.",
                      "Le jeton n'a pas la portée « {scope} » requise par cette route."),
    "resource_not_found": ("No such object in this workspace.", "Aucun objet de ce type dans cet espace de travail."),
    "issue_already_fixed": ("The issue is fixed, nothing to mark; recheck it instead.",
                            "Le problème est corrigé, rien à marquer ; relancez plutôt une vérification."),
    "proof_required": ("The site must first be proved owned.",
                       "Le site doit d'abord être prouvé comme vous appartenant."),
    "site_excluded": ("This site is excluded.", "Ce site est exclu."),
    "target_exists": ("The address is already a target of this project.",
                      "Cette adresse est déjà une cible de ce projet."),
    "repository_host_unavailable": ("The hosted repository service cannot be reached.",
                                    "Le service d'hébergement des dépôts est injoignable."),
    "idempotency_conflict": ("This Idempotency-Key was already used with another request.",
                             "Cette Idempotency-Key a déjà servi pour une autre requête."),
    "idempotency_in_progress": ("A request with this Idempotency-Key is still being processed.",
                                "Une requête avec cette Idempotency-Key est encore en cours de traitement."),
    "rate_limited": ("Too many requests for this key; retry after {retry_after} seconds.",
                     "Trop de requêtes pour cette clé ; réessayez dans {retry_after} secondes."),
    "recheck_limit_reached": ("60 rechecks per project and per day exceeded.",
                              "Plus de 60 vérifications par projet et par jour."),
    "repository_analyses_limit_reached": ("The workspace's repository analyses ceiling over 24 hours is reached.",
                                          "Le plafond d'analyses de dépôts sur 24 heures est atteint."),
    "internal_error": ("Error on the service side; retry later.", "Erreur côté service ; réessayez plus tard."),
    "service_unavailable": ("Temporarily unavailable; retry with the same Idempotency-Key.",
                            "Temporairement indisponible ; réessayez avec la même Idempotency-Key."),
    "platform_busy": ("Too many scans at once; retry in a few minutes. Nothing was charged.",
                      "Trop d'analyses en cours ; réessayez dans quelques minutes. Rien n'a été facturé."),
}


def message(code: str, lang: str, **fmt: object) -> str:
    en, fr = MESSAGES.get(code, (code, code))
    text = fr if lang == "fr" else en
    try:
        return text.format(**fmt) if fmt else text.replace("{param}", "?").replace("{scope}", "?")
    except (KeyError, IndexError):
        return text
