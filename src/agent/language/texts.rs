//! The engine's fixed texts, in Spanish (the platform default) and English.
//! Every text here carries no data: it is safe on an empty or failed result
//! (contract 1, rule 6) and names no internal identifier (rule 5).

use crate::domain::interaction::InteractionStatus;

use crate::domain::language::Language;

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

/// An operation the user asked for that no capability prepares.
pub fn operation_not_offered(language: Language) -> &'static str {
    match language {
        Language::English => {
            "I can't prepare that operation here. Is there anything else I can help you with?"
        }
        Language::Spanish => {
            "No puedo preparar esa operación desde aquí. ¿Hay algo más en lo que pueda ayudarte?"
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
        Language::English => format!("To continue, I need {what}. What is it?"),
        Language::Spanish => format!("Para continuar necesito {what}. ¿Cuál es?"),
    }
}

/// Thanks or a goodbye.
pub fn closing(language: Language) -> &'static str {
    match language {
        Language::English => "You're welcome! Is there anything else I can help you with?",
        Language::Spanish => "¡De nada! ¿Hay algo más en lo que pueda ayudarte?",
    }
}

/// `cancelar` when no operation is waiting.
pub fn nothing_to_cancel(language: Language) -> &'static str {
    match language {
        Language::English => "There is no pending operation to cancel.",
        Language::Spanish => "No hay ninguna operación pendiente que cancelar.",
    }
}

/// Rule 12: an image alone does not say what to extract from it.
pub fn image_needs_instructions(language: Language) -> &'static str {
    match language {
        Language::English => {
            "I received the image. What would you like me to do with it? Tell me what you need and I'll use it for that."
        }
        Language::Spanish => {
            "He recibido la imagen. ¿Qué quieres que haga con ella? Dime qué necesitas y la usaré para eso."
        }
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

/// Rule 3: the user said no to the proposed value; which one, then?
pub fn which_one(language: Language, what: &str, options: &[String]) -> String {
    let (list, or) = match options {
        [] => (String::new(), ""),
        [one] => (one.clone(), ""),
        [init @ .., last] => (init.join(", "), last.as_str()),
    };
    let listed = if or.is_empty() {
        list
    } else {
        match language {
            Language::English => format!("{list} or {or}"),
            Language::Spanish => format!("{list} o {or}"),
        }
    };
    match language {
        Language::English => format!("Which one, then? For {what} you mentioned {listed}."),
        Language::Spanish => format!("¿Cuál, entonces? Para {what} mencionaste {listed}."),
    }
}

pub fn confirm_interaction(language: Language, title: &str) -> String {
    match language {
        Language::English => format!(
            "{}Please review and confirm the operation.",
            sentence(title)
        ),
        Language::Spanish => format!("{}Revisa y confirma la operación.", sentence(title)),
    }
}

pub fn choose_option(language: Language, title: &str) -> String {
    match language {
        Language::English => format!("{}Please choose one of the options.", sentence(title)),
        Language::Spanish => format!("{}Elige una de las opciones.", sentence(title)),
    }
}

/// A host's title as a sentence followed by a space: "¿Qué artículo?" keeps
/// its question mark, "Devolver el pedido" gains a full stop.
fn sentence(title: &str) -> String {
    let title = title.trim();
    match title.chars().last() {
        None => String::new(),
        Some('.' | '?' | '!' | '…') => format!("{title} "),
        Some(_) => format!("{title}. "),
    }
}

/// One fact of a result as the user reads it: a label (the output schema's
/// `description` when it is short and in the conversation's language, the
/// humanised field name otherwise; empty for a record of a list) and the
/// value in words. `grounding` finds them; [`result_summary`] says them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fact {
    pub label: String,
    pub value: String,
}

/// A grounded reply written from the pruned result alone: one labelled
/// fact on one line, a short list for several; a fact without a label (a
/// record of a list) is its value alone.
pub fn result_summary(language: Language, facts: &[Fact]) -> String {
    let intro = match language {
        Language::English => "Here is what I found:",
        Language::Spanish => "Esto es lo que encontré:",
    };
    let line = |f: &Fact| {
        if f.label.is_empty() {
            f.value.clone()
        } else {
            format!("{}: {}", f.label, f.value)
        }
    };
    match facts {
        [] => empty_result(language).to_owned(),
        [one] if one.label.is_empty() => format!("{intro} {}.", one.value),
        [one] => format!("{}.", line(one)),
        many => {
            let mut text = intro.to_owned();
            for fact in many {
                text.push_str("\n- ");
                text.push_str(&line(fact));
            }
            text
        }
    }
}

/// The deterministic text appended when the host reports a terminal status.
pub fn operation_reported(language: Language, status: InteractionStatus) -> &'static str {
    use InteractionStatus::*;
    match (language, status) {
        (Language::Spanish, Succeeded) => "La operación se completó correctamente.",
        (Language::Spanish, Failed) => "La operación no se pudo completar.",
        (Language::Spanish, Cancelled) => "La operación fue cancelada.",
        (Language::Spanish, Rejected) => "La operación fue rechazada.",
        // A host never reports `pending` (the route refuses it).
        (Language::Spanish, Expired | Pending) => "La operación expiró sin completarse.",
        (Language::English, Succeeded) => "The operation was completed successfully.",
        (Language::English, Failed) => "The operation could not be completed.",
        (Language::English, Cancelled) => "The operation was cancelled.",
        (Language::English, Rejected) => "The operation was rejected.",
        (Language::English, Expired | Pending) => "The operation expired before it was completed.",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn which_one_lists_the_values_and_titles_end_once() {
        assert_eq!(
            which_one(
                Language::Spanish,
                "el número de pedido",
                &["A-1002".into(), "A-1001".into()]
            ),
            "¿Cuál, entonces? Para el número de pedido mencionaste A-1002 o A-1001."
        );
        assert_eq!(
            which_one(
                Language::English,
                "the order number",
                &["B-1".into(), "B-2".into(), "B-3".into()]
            ),
            "Which one, then? For the order number you mentioned B-1, B-2 or B-3."
        );
        assert_eq!(
            choose_option(Language::Spanish, "¿Qué artículo quieres devolver?"),
            "¿Qué artículo quieres devolver? Elige una de las opciones."
        );
        assert_eq!(
            confirm_interaction(Language::English, "Return order B-2001"),
            "Return order B-2001. Please review and confirm the operation."
        );
    }
}
