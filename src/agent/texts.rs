//! The engine's fixed texts, in Spanish (the platform default) and English.
//! Every text here carries no data: it is safe on an empty or failed result
//! (contract 1, rule 6) and names no internal identifier (rule 5).

use crate::domain::interaction::InteractionStatus;

use super::language::Language;

/// Rule 9: the not-found preparation text, exactly.
pub const NOT_FOUND: &str = "No hay una operación disponible para esta consulta.";

pub fn out_of_scope_default(language: Language, topics: &[(String, String)]) -> String {
    let names: Vec<&str> = topics.iter().map(|(n, _)| n.as_str()).collect();
    match (language, names.is_empty()) {
        (Language::English, true) => "I can't help with that request.".into(),
        (Language::English, false) => format!("I can only help with: {}.", names.join(", ")),
        (Language::Spanish, true) => "No puedo ayudarte con esa solicitud.".into(),
        (Language::Spanish, false) => format!("Solo puedo ayudarte con: {}.", names.join(", ")),
    }
}

pub fn exclusion_fallback(language: Language) -> &'static str {
    match language {
        Language::English => {
            "Understood: I won't consult any system for this request, so I can't give you live data. Is there anything else I can help with?"
        }
        Language::Spanish => {
            "Entendido: no consultaré ningún sistema para esta solicitud, así que no puedo darte datos en vivo. ¿Hay algo más en lo que pueda ayudarte?"
        }
    }
}

pub fn cancelled(language: Language) -> &'static str {
    match language {
        Language::English => "Done: the pending operation was discarded. Nothing was changed.",
        Language::Spanish => "Listo: descarté la operación pendiente. No se realizó ningún cambio.",
    }
}

pub fn no_capability(language: Language) -> &'static str {
    match language {
        Language::English => "I don't have a way to look that up yet.",
        Language::Spanish => "Todavía no tengo una forma de consultar eso.",
    }
}

pub fn empty_result(language: Language) -> &'static str {
    match language {
        Language::English => "I found no information for that request.",
        Language::Spanish => "No encontré información para esa consulta.",
    }
}

pub fn failed(language: Language) -> &'static str {
    match language {
        Language::English => "I couldn't get that information right now. Please try again later.",
        Language::Spanish => {
            "No pude obtener esa información en este momento. Inténtalo de nuevo más tarde."
        }
    }
}

pub fn preparation_without_intent(language: Language) -> &'static str {
    match language {
        Language::English => "What operation would you like to do?",
        Language::Spanish => "¿Qué operación quieres realizar?",
    }
}

/// Rule 2: ask for a missing argument by its description (or its name).
pub fn ask_for(language: Language, what: &str) -> String {
    match language {
        Language::English => format!("To continue I need this: {what}. What is it?"),
        Language::Spanish => format!("Para continuar necesito este dato: {what}. ¿Cuál es?"),
    }
}

/// Rule 3: history holds several values; propose the most recent.
pub fn confirm_value(language: Language, what: &str, proposed: &str, others: &[String]) -> String {
    match language {
        Language::English => format!(
            "For {what}, do you mean {proposed}? (Earlier you also mentioned {}.) Answer yes, or tell me which one.",
            others.join(", ")
        ),
        Language::Spanish => format!(
            "Para {what}, ¿te refieres a {proposed}? (Antes también mencionaste {}.) Responde sí, o dime cuál.",
            others.join(", ")
        ),
    }
}

pub fn confirm_interaction(language: Language, title: &str) -> String {
    match language {
        Language::English => format!("{title}. Please review and confirm the operation."),
        Language::Spanish => format!("{title}. Revisa y confirma la operación."),
    }
}

pub fn choose_option(language: Language, title: &str) -> String {
    match language {
        Language::English => format!("{title}. Please choose one of the options."),
        Language::Spanish => format!("{title}. Elige una de las opciones."),
    }
}

/// A grounded reply written from the pruned result alone.
pub fn result_summary(language: Language, facts: &str) -> String {
    match language {
        Language::English => format!("This is what I found: {facts}."),
        Language::Spanish => format!("Esto es lo que encontré: {facts}."),
    }
}

/// The deterministic text appended when the host reports a terminal status.
pub fn operation_reported(status: InteractionStatus) -> &'static str {
    match status {
        InteractionStatus::Succeeded => "La operación se completó correctamente.",
        InteractionStatus::Failed => "La operación no se pudo completar.",
        InteractionStatus::Cancelled => "La operación fue cancelada.",
        InteractionStatus::Rejected => "La operación fue rechazada.",
        // A host never reports `pending` (the route refuses it).
        InteractionStatus::Expired | InteractionStatus::Pending => {
            "La operación expiró sin completarse."
        }
    }
}
