//! Resource quantities (`1Gi`, `500m`, `1e3`) as apimachinery parses them: the syntax the server
//! accepts when it decodes a body (a malformed quantity makes the whole body undecodable, a 400,
//! not a field error), and exact comparison and step arithmetic for the capacity request policy
//! checks.

use std::cmp::Ordering;

/// The regular expression apimachinery names when a quantity does not parse.
pub(crate) const QUANTITY_FORMAT: &str =
    "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'";

/// A parsed quantity: `mantissa × 10^exponent`, exactly.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Quantity {
    mantissa: i128,
    exponent: i32,
}

/// Why a string is not a quantity.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub(crate) enum QuantityError {
    /// Not of the quantity syntax.
    #[error("{QUANTITY_FORMAT}")]
    Format,
    /// Of the syntax, but with a suffix apimachinery does not know (e.g. `1K`).
    #[error("unable to parse quantity's suffix")]
    Suffix,
    /// Too many digits to hold exactly.
    #[error("quantity is too large")]
    TooLarge,
}

impl Quantity {
    /// Parses `text` the way `resource.ParseQuantity` does.
    pub(crate) fn parse(text: &str) -> Result<Self, QuantityError> {
        let (negative, rest) = match text.as_bytes().first() {
            Some(b'-') => (true, &text[1..]),
            Some(b'+') => (false, &text[1..]),
            _ => (false, text),
        };
        let number_len = rest
            .bytes()
            .take_while(|c| c.is_ascii_digit() || *c == b'.')
            .count();
        let (number, suffix) = rest.split_at(number_len);
        let (whole, fraction) = number.split_once('.').unwrap_or((number, ""));
        if fraction.contains('.') || (whole.is_empty() && fraction.is_empty()) {
            return Err(QuantityError::Format);
        }
        let mut mantissa: i128 = 0;
        for digit in whole.bytes().chain(fraction.bytes()) {
            mantissa = mantissa
                .checked_mul(10)
                .and_then(|m| m.checked_add(i128::from(digit - b'0')))
                .ok_or(QuantityError::TooLarge)?;
        }
        let fraction_digits = i32::try_from(fraction.len()).map_err(|_| QuantityError::TooLarge)?;
        let (exponent, binary) = suffix_scale(suffix)?;
        let mantissa = mantissa
            .checked_mul(1i128 << binary)
            .ok_or(QuantityError::TooLarge)?;
        Ok(Self {
            mantissa: if negative { -mantissa } else { mantissa },
            exponent: exponent - fraction_digits,
        })
    }

    /// Whether the quantity is above zero.
    pub(crate) fn is_positive(&self) -> bool {
        self.mantissa > 0
    }

    /// Whether the quantity is below zero.
    pub(crate) fn is_negative(&self) -> bool {
        self.mantissa < 0
    }

    /// Both mantissas at the smaller exponent, or `None` when that does not fit.
    fn aligned(a: Self, b: Self) -> Option<(i128, i128, i32)> {
        let exponent = a.exponent.min(b.exponent);
        let scale = |q: Self| {
            let shift = u32::try_from(q.exponent - exponent).ok()?;
            10i128.checked_pow(shift)?.checked_mul(q.mantissa)
        };
        Some((scale(a)?, scale(b)?, exponent))
    }

    fn approximate(self) -> f64 {
        self.mantissa as f64 * 10f64.powi(self.exponent)
    }

    /// `self + other`, when it can be held exactly.
    pub(crate) fn checked_add(self, other: Self) -> Option<Self> {
        let (a, b, exponent) = Self::aligned(self, other)?;
        Some(Self {
            mantissa: a.checked_add(b)?,
            exponent,
        })
    }

    /// Whether `self - base` is a whole multiple of `step` (`None` when `step` is zero or the
    /// numbers cannot be aligned exactly).
    pub(crate) fn is_step_from(self, base: Self, step: Self) -> Option<bool> {
        let (value, base, exponent) = Self::aligned(self, base)?;
        let difference = Self {
            mantissa: value.checked_sub(base)?,
            exponent,
        };
        let (difference, step, _) = Self::aligned(difference, step)?;
        (step != 0).then(|| difference % step == 0)
    }
}

impl PartialEq for Quantity {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for Quantity {}

impl PartialOrd for Quantity {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Quantity {
    fn cmp(&self, other: &Self) -> Ordering {
        match Self::aligned(*self, *other) {
            Some((a, b, _)) => a.cmp(&b),
            None => self.approximate().total_cmp(&other.approximate()),
        }
    }
}

/// The decimal exponent and binary shift of a suffix.
fn suffix_scale(suffix: &str) -> Result<(i32, u32), QuantityError> {
    let letters = suffix
        .bytes()
        .take_while(|c| b"eEinumkKMGTP".contains(c))
        .count();
    let tail = &suffix[letters..];
    let tail_ok = {
        let digits = tail.strip_prefix(['+', '-']).unwrap_or(tail);
        digits.bytes().all(|c| c.is_ascii_digit())
    };
    if !tail_ok {
        return Err(QuantityError::Format);
    }
    let scale = match suffix {
        "" => (0, 0),
        "n" => (-9, 0),
        "u" => (-6, 0),
        "m" => (-3, 0),
        "k" => (3, 0),
        "M" => (6, 0),
        "G" => (9, 0),
        "T" => (12, 0),
        "P" => (15, 0),
        "E" => (18, 0),
        "Ki" => (0, 10),
        "Mi" => (0, 20),
        "Gi" => (0, 30),
        "Ti" => (0, 40),
        "Pi" => (0, 50),
        "Ei" => (0, 60),
        other => {
            let exponent = other
                .strip_prefix(['e', 'E'])
                .ok_or(QuantityError::Suffix)?;
            let digits = exponent.strip_prefix(['+', '-']).unwrap_or(exponent);
            if digits.is_empty() || !digits.bytes().all(|c| c.is_ascii_digit()) {
                return Err(QuantityError::Suffix);
            }
            (exponent.parse().map_err(|_| QuantityError::TooLarge)?, 0)
        }
    };
    Ok(scale)
}

#[cfg(test)]
#[path = "quantity_tests.rs"]
mod tests;
