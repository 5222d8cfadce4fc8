//! Finds personal data in plain text: email addresses, phone numbers, payment card numbers
//! (Luhn-checked) and IBANs (mod-97-checked), each candidate regex backed by a validator.

use policy_kit::Hit;
use regex::Regex;
use std::sync::LazyLock;

/// The entities, in the order overlapping finds are settled (earlier wins).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Entity {
    Card,
    Iban,
    Email,
    Phone,
}

impl Entity {
    pub const ALL: [Entity; 4] = [Entity::Email, Entity::Phone, Entity::Card, Entity::Iban];

    /// The name used in settings and, upper-cased, in the default replacement.
    pub fn name(self) -> &'static str {
        match self {
            Entity::Email => "email",
            Entity::Phone => "phone",
            Entity::Card => "card",
            Entity::Iban => "iban",
        }
    }

    /// How a denial names it.
    pub fn label(self) -> &'static str {
        match self {
            Entity::Email => "an email address",
            Entity::Phone => "a phone number",
            Entity::Card => "a payment card number",
            Entity::Iban => "an IBAN",
        }
    }

    pub fn from_name(name: &str) -> Option<Entity> {
        Entity::ALL.into_iter().find(|e| e.name().eq_ignore_ascii_case(name))
    }

    fn priority(self) -> usize {
        self as usize
    }
}

// Boundaries are ASCII (`(?-u:\b)`): a Unicode one would send the lazy DFA back to the slow
// engine on any non-ASCII text, and every pattern here is ASCII anyway.
static EMAIL: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"[A-Za-z0-9._%+\-]+@[A-Za-z0-9](?:[A-Za-z0-9\-]{0,61}[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9\-]{0,61}[A-Za-z0-9])?)*\.[A-Za-z]{2,24}(?-u:\b)",
    )
    .unwrap()
});

// Digit groups joined by single separators; which of these are phone numbers is decided in
// `is_phone`, since dates, versions and prices have the same shape.
static PHONE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"(?x)
        (?:
            \+[0-9]{1,3} (?: [\ .\-]? (?: \([0-9]{1,5}\) | [0-9]{1,8} ) ){1,7}
          | (?: \([0-9]{1,5}\)[\ .\-]? | (?-u:\b)[0-9]{1,8}[\ .\-] ) (?: [0-9]{1,8}[\ .\-] ){0,6} [0-9]{1,8}
        )(?-u:\b)",
    )
    .unwrap()
});

static CARD: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"(?-u:\b)[0-9](?:[\ \-]?[0-9]){12,18}(?-u:\b)").unwrap());

static IBAN: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?-u:\b)[A-Z]{2}[0-9]{2}(?:\ ?[A-Z0-9]{4}){2,7}(?:\ ?[A-Z0-9]{1,4})?(?-u:\b)").unwrap()
});

/// Whether a candidate at `start..end` of a text really is the entity.
type Validator = fn(&str, usize, usize) -> bool;

/// Every find of `entities` in `text`, disjoint and sorted; `Hit::kind` is an [`Entity`] as
/// usize (its priority).
pub fn find(text: &str, entities: &[Entity]) -> Vec<Hit> {
    let mut ordered: Vec<Entity> = entities.to_vec();
    ordered.sort_by_key(|e| e.priority());
    ordered.dedup();
    let mut hits = Vec::new();
    for entity in ordered {
        let (re, valid): (&Regex, Validator) = match entity {
            Entity::Email => (&EMAIL, |_, _, _| true),
            Entity::Phone => (&PHONE, is_phone),
            Entity::Card => (&CARD, is_card),
            Entity::Iban => (&IBAN, is_iban),
        };
        for (start, end) in scan(re, text, valid) {
            hits.push(Hit { start, end, kind: entity as usize });
        }
    }
    policy_kit::disjoint(hits)
}

pub fn entity_of(hit: &Hit) -> Entity {
    [Entity::Card, Entity::Iban, Entity::Email, Entity::Phone][hit.kind]
}

/// The valid matches of `re`; after a rejected candidate the search restarts at its next word,
/// so that a date glued to a phone number does not hide the number.
fn scan(re: &Regex, text: &str, valid: Validator) -> Vec<(usize, usize)> {
    let mut found = Vec::new();
    let mut at = 0;
    while at <= text.len() {
        let Some(m) = re.find_at(text, at) else { break };
        if valid(text, m.start(), m.end()) {
            found.push((m.start(), m.end()));
            at = m.end().max(m.start() + 1);
        } else {
            at = next_word(text, m.start());
        }
    }
    found
}

/// The first position after `from` where an alphanumeric run starts (or the text's end).
fn next_word(text: &str, from: usize) -> usize {
    let mut prev_alnum = true;
    for (i, c) in text[from..].char_indices() {
        let alnum = c.is_ascii_alphanumeric();
        if i > 0 && alnum && !prev_alnum {
            return from + i;
        }
        prev_alnum = alnum;
    }
    text.len() + 1
}

fn digits(s: &str) -> Vec<u32> {
    s.chars().filter_map(|c| c.to_digit(10)).collect()
}

pub fn luhn(digits: &[u32]) -> bool {
    let sum: u32 = digits
        .iter()
        .rev()
        .enumerate()
        .map(|(i, &d)| if i % 2 == 1 { if d * 2 > 9 { d * 2 - 9 } else { d * 2 } } else { d })
        .sum();
    sum.is_multiple_of(10)
}

fn is_card(text: &str, start: usize, end: usize) -> bool {
    let d = digits(&text[start..end]);
    // A run of one digit passes Luhn (e.g. all zeros) and is never a card.
    (13..=19).contains(&d.len()) && d.iter().any(|&x| x != d[0]) && luhn(&d) && !glued_to_number(text, start, end)
}

fn is_iban(text: &str, start: usize, end: usize) -> bool {
    let compact: Vec<char> = text[start..end].chars().filter(|c| *c != ' ').collect();
    if !(15..=34).contains(&compact.len()) {
        return false;
    }
    // ISO 13616: move the first four to the end, letters count as 10..35, the number mod 97 is 1.
    let mut rest = 0u32;
    for c in compact[4..].iter().chain(&compact[..4]) {
        let v = c.to_digit(36).unwrap_or(0);
        rest = if v >= 10 { (rest * 100 + v) % 97 } else { (rest * 10 + v) % 97 };
    }
    rest == 1
}

/// Whether `start..end` is only part of a bigger number: a decimal, date, time or version
/// continues it on either side.
fn glued_to_number(text: &str, start: usize, end: usize) -> bool {
    let before: Vec<char> = text[..start].chars().rev().take(2).collect();
    let after: Vec<char> = text[end..].chars().take(2).collect();
    let joins = |c: char| matches!(c, '.' | ',' | ':' | '/' | '-');
    let glued_before = matches!(before.as_slice(), [j, d, ..] if joins(*j) && d.is_ascii_digit())
        || before.first().is_some_and(|c| c.is_ascii_alphanumeric() || *c == '+');
    let glued_after = matches!(after.as_slice(), [j, d, ..] if joins(*j) && d.is_ascii_digit());
    glued_before || glued_after
}

/// Whether a currency sign or percent stands next to `start..end` (at most one space between).
fn next_to_money(text: &str, start: usize, end: usize) -> bool {
    let money = |c: char| matches!(c, '$' | '€' | '£' | '¥' | '₹' | '%');
    let before = text[..start].trim_end_matches(' ');
    let after = text[end..].trim_start_matches(' ');
    let near_before = text[..start].len() - before.len() <= 1 && before.chars().next_back().is_some_and(money);
    let near_after = text[end..].len() - after.len() <= 1 && after.chars().next().is_some_and(money);
    near_before || near_after
}

fn is_phone(text: &str, start: usize, end: usize) -> bool {
    let s = &text[start..end];
    let groups: Vec<&str> = s.split(|c: char| !c.is_ascii_digit()).filter(|g| !g.is_empty()).collect();
    let count: usize = groups.iter().map(|g| g.len()).sum();
    if !(7..=15).contains(&count) || glued_to_number(text, start, end) || next_to_money(text, start, end) {
        return false;
    }
    if let Some(international) = s.strip_prefix('+') {
        return !international.starts_with('0');
    }
    // National forms: real groups have two digits or more, except a leading trunk digit.
    if groups.len() < 2 || groups[1..].iter().any(|g| g.len() < 2) {
        return false;
    }
    let separators: Vec<char> = s.chars().filter(|c| matches!(c, '.' | ' ' | '-')).collect();
    let dotted = !separators.is_empty() && separators.iter().all(|&c| c == '.') && !s.contains('(');
    let num = |g: &str| g.parse::<u32>().unwrap_or(0);
    let year = |g: &str| g.len() == 4 && (1000..=2999).contains(&num(g));
    let day_or_month = |g: &str| g.len() <= 2 && (1..=31).contains(&num(g));
    let month = |g: &str| g.len() <= 2 && (1..=12).contains(&num(g));
    match groups.as_slice() {
        // A decimal number, or a range of years.
        [_, _] if dotted => false,
        [a, b] if year(a) && year(b) => false,
        // Dates: 2024-01-15, 15.01.2024, 01-15-2024, and a date glued to a time's hour.
        [y, m, d, ..] if year(y) && month(m) && day_or_month(d) => false,
        [a, b, y, ..] if year(y) && day_or_month(a) && day_or_month(b) && (month(a) || month(b)) => false,
        // An IPv4 address.
        [_, _, _, _] if dotted && groups.iter().all(|g| g.len() <= 3) => false,
        _ => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn found(text: &str, entity: Entity) -> Vec<&str> {
        find(text, &[entity]).iter().map(|h| &text[h.start..h.end]).collect()
    }

    #[test]
    fn emails_are_found_whole() {
        assert_eq!(
            found("write to jane.doe+tag@mail.example.co.uk, thanks", Entity::Email),
            ["jane.doe+tag@mail.example.co.uk"]
        );
        assert_eq!(found("<a@b.io>", Entity::Email), ["a@b.io"]);
        assert!(found("user@localhost or @handle or a@b", Entity::Email).is_empty());
    }

    #[test]
    fn international_and_national_phone_numbers_are_found() {
        for phone in [
            "+1 (555) 123-4567",
            "+44 20 7946 0958",
            "+44 (0) 20 7946 0958",
            "+33 6 12 34 56 78",
            "+4915112345678",
            "+49-30-1234567",
            "(555) 123-4567",
            "555-123-4567",
            "555.123.4567",
            "555 123 4567",
            "020 7946 0958",
            "0170 1234567",
            "06 12 34 56 78",
            "1-800-555-1234",
        ] {
            let text = format!("call {phone} today");
            assert_eq!(found(&text, Entity::Phone), [phone], "{phone}");
        }
        assert_eq!(found("tel:+1-555-123-4567.", Entity::Phone), ["+1-555-123-4567"]);
    }

    #[test]
    fn years_prices_dates_times_versions_and_addresses_are_not_phone_numbers() {
        for text in [
            "in 2024",
            "from 1999-2024",
            "1999 - 2024",
            "costs $1,299.99",
            "costs 12345.67 in total",
            "costs $ 1 299 999",
            "costs 1 299 999 €",
            "rose 1 234 567%",
            "on 2024-01-15",
            "on 2024-01-15 12:30:45",
            "on 2024-01-15T12:30:45Z",
            "on 15.01.2024",
            "on 01-15-2024",
            "on 2024.01.15",
            "at 12:30:45",
            "version 1.2.3",
            "version 10.0.19045.1234",
            "host 192.168.100.200",
            "host 10.0.0.1",
            "pi 3.14159265",
            "id 1234567890",
        ] {
            assert!(found(text, Entity::Phone).is_empty(), "{text}: {:?}", found(text, Entity::Phone));
        }
    }

    #[test]
    fn a_country_code_cannot_start_with_zero() {
        // The rest is still a plausible local number.
        assert_eq!(found("+0 123 4567", Entity::Phone), ["123 4567"]);
    }

    #[test]
    fn a_date_next_to_a_phone_number_does_not_hide_it() {
        assert_eq!(found("2024-01-15 555-123-4567", Entity::Phone), ["555-123-4567"]);
    }

    #[test]
    fn cards_must_pass_luhn_and_may_be_grouped() {
        assert_eq!(found("card 4111 1111 1111 1111 exp", Entity::Card), ["4111 1111 1111 1111"]);
        assert_eq!(found("card 4111-1111-1111-1111.", Entity::Card), ["4111-1111-1111-1111"]);
        assert_eq!(found("amex 378282246310005", Entity::Card), ["378282246310005"]);
        assert_eq!(found("in 2024 4111 1111 1111 1111", Entity::Card), ["4111 1111 1111 1111"]);
        assert!(found("card 4111 1111 1111 1112", Entity::Card).is_empty(), "Luhn fails");
        assert!(found("order 1234567890123", Entity::Card).is_empty());
        assert!(found("zeros 0000000000000", Entity::Card).is_empty());
        assert!(found("pi 3.4111111111111111", Entity::Card).is_empty(), "part of a decimal");
        assert!(luhn(&digits("79927398713")) && !luhn(&digits("79927398710")));
    }

    #[test]
    fn ibans_must_pass_mod_97() {
        assert_eq!(found("to DE89 3704 0044 0532 0130 00 AND", Entity::Iban), ["DE89 3704 0044 0532 0130 00"]);
        assert_eq!(found("GB82WEST12345698765432.", Entity::Iban), ["GB82WEST12345698765432"]);
        assert_eq!(found("FR14 2004 1010 0505 0001 3M02 606", Entity::Iban), ["FR14 2004 1010 0505 0001 3M02 606"]);
        assert!(found("DE88 3704 0044 0532 0130 00", Entity::Iban).is_empty(), "check digits wrong");
        assert!(found("AB12 CDEF GHIJ", Entity::Iban).is_empty());
    }

    #[test]
    fn overlapping_finds_go_to_the_stronger_entity_and_only_asked_ones_are_found() {
        let text = "mail a@b.io, card 4111 1111 1111 1111, phone +1 555 123 4567, iban DE89370400440532013000";
        let kinds: Vec<&str> = find(text, &Entity::ALL).iter().map(|h| entity_of(h).name()).collect();
        assert_eq!(kinds, ["email", "card", "phone", "iban"]);
        let only: Vec<&str> = find(text, &[Entity::Iban]).iter().map(|h| entity_of(h).name()).collect();
        assert_eq!(only, ["iban"]);
        assert!(find("nothing here 42", &Entity::ALL).is_empty());
    }
}
