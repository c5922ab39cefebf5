//! Kubernetes quantities (`"40Gi"`, `"500m"`, `"1e3"`), parsed strictly so
//! counters and capacities can be checked and compared before they are sent.
//!
//! The grammar is the API's: an optional sign, digits with at most one
//! decimal point, and one suffix: none, a binary one (`Ki` … `Ei`), a decimal
//! one (`n`, `u`, `m`, `k`, `M`, `G`, `T`, `P`, `E`) or a decimal exponent
//! (`e3`, `E-2`). A parsed quantity is held exactly as a count of
//! nano-units; like the API server, precision below a nano-unit rounds up.
//! Values beyond about 1.7 × 10^29 are refused as too large (no device has
//! that much of anything). The host checks a guest's layout with it too.

use std::fmt;

/// A parsed quantity, in nano-units.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Quantity(i128);

/// Why a text is not a quantity.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum QuantityError {
    /// Nothing at all.
    #[error("an empty string is not a quantity")]
    Empty,
    /// No digit in the number part.
    #[error("{0:?} has no number")]
    NoNumber(String),
    /// Something after the number that is not a suffix.
    #[error(
        "{text:?}: {suffix:?} is not a quantity suffix (Ki, Mi, Gi, Ti, Pi, Ei, n, u, m, k, M, G, T, P, E or an exponent such as e3)"
    )]
    BadSuffix {
        /// The whole text.
        text: String,
        /// What followed the number.
        suffix: String,
    },
    /// More than this crate can hold.
    #[error("{0:?} is too large")]
    TooLarge(String),
}

const NANOS_PER_UNIT: i128 = 1_000_000_000;

impl Quantity {
    /// Parses `text` (see the module docs).
    pub fn parse(text: &str) -> Result<Self, QuantityError> {
        if text.is_empty() {
            return Err(QuantityError::Empty);
        }
        let (negative, rest) = match text.as_bytes()[0] {
            b'+' => (false, &text[1..]),
            b'-' => (true, &text[1..]),
            _ => (false, text),
        };
        let number_len = rest
            .bytes()
            .take_while(|b| b.is_ascii_digit() || *b == b'.')
            .count();
        let (number, suffix) = rest.split_at(number_len);
        let (whole, fraction) = number.split_once('.').unwrap_or((number, ""));
        if whole.is_empty() && fraction.is_empty() {
            return Err(QuantityError::NoNumber(text.to_owned()));
        }
        if fraction.contains('.') {
            return Err(QuantityError::BadSuffix {
                text: text.to_owned(),
                suffix: number[whole.len()..].to_owned(),
            });
        }
        let bad_suffix = || QuantityError::BadSuffix {
            text: text.to_owned(),
            suffix: suffix.to_owned(),
        };
        let too_large = || QuantityError::TooLarge(text.to_owned());
        // value = digits × 2^binary × 10^(decimal - fraction.len()) units.
        let (binary, decimal): (u32, i64) = match suffix {
            "" => (0, 0),
            "Ki" => (10, 0),
            "Mi" => (20, 0),
            "Gi" => (30, 0),
            "Ti" => (40, 0),
            "Pi" => (50, 0),
            "Ei" => (60, 0),
            "n" => (0, -9),
            "u" => (0, -6),
            "m" => (0, -3),
            "k" => (0, 3),
            "M" => (0, 6),
            "G" => (0, 9),
            "T" => (0, 12),
            "P" => (0, 15),
            "E" => (0, 18),
            _ => {
                let exponent = suffix.strip_prefix(['e', 'E']).ok_or_else(bad_suffix)?;
                let digits = exponent.strip_prefix(['+', '-']).unwrap_or(exponent);
                if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
                    return Err(bad_suffix());
                }
                (0, exponent.parse::<i64>().map_err(|_| too_large())?)
            }
        };
        let mut mantissa: i128 = 0;
        for digit in whole.bytes().chain(fraction.bytes()) {
            mantissa = mantissa
                .checked_mul(10)
                .and_then(|m| m.checked_add(i128::from(digit - b'0')))
                .ok_or_else(too_large)?;
        }
        mantissa = mantissa
            .checked_mul(1_i128.checked_shl(binary).ok_or_else(too_large)?)
            .ok_or_else(too_large)?;
        let scale = decimal + 9 - fraction.len() as i64;
        let nanos = if mantissa == 0 {
            0
        } else if scale >= 0 {
            let factor = u32::try_from(scale)
                .ok()
                .and_then(|scale| 10_i128.checked_pow(scale))
                .ok_or_else(too_large)?;
            mantissa.checked_mul(factor).ok_or_else(too_large)?
        } else {
            // Below a nano-unit: round up, as the API server does.
            match u32::try_from(-scale)
                .ok()
                .and_then(|s| 10_i128.checked_pow(s))
            {
                Some(divisor) => (mantissa + divisor - 1) / divisor,
                None => 1,
            }
        };
        Ok(Quantity(if negative { -nanos } else { nanos }))
    }

    /// Zero.
    pub const ZERO: Quantity = Quantity(0);

    /// Whether this is below zero.
    pub fn is_negative(self) -> bool {
        self.0 < 0
    }

    /// `self + other`, `None` on overflow.
    pub fn checked_add(self, other: Quantity) -> Option<Quantity> {
        self.0.checked_add(other.0).map(Quantity)
    }

    /// Whether `self - base` is a whole multiple of `step` (`step` > 0).
    pub fn is_step_from(self, base: Quantity, step: Quantity) -> bool {
        step.0 > 0 && (self.0 - base.0) % step.0 == 0
    }
}

impl fmt::Display for Quantity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let units = self.0 / NANOS_PER_UNIT;
        let nanos = (self.0 % NANOS_PER_UNIT).abs();
        if nanos == 0 {
            write!(f, "{units}")
        } else {
            let sign = if self.0 < 0 && units == 0 { "-" } else { "" };
            let fraction = format!("{nanos:09}");
            write!(f, "{sign}{units}.{}", fraction.trim_end_matches('0'))
        }
    }
}

#[cfg(test)]
#[path = "quantity_tests.rs"]
mod tests;
