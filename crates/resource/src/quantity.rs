//! Kubernetes quantities (`80Gi`, `7`, `500m`, `1.5`, `2e3`) as guests
//! write them in counters and capacities, read strictly into milli-units
//! so amounts can be checked and compared before they are published.
//!
//! The grammar is the API server's: an optional `+`, digits with an
//! optional fraction, then one suffix — binary (`Ki` `Mi` `Gi` `Ti` `Pi`
//! `Ei`), decimal (`n` `u` `m` `k` `M` `G` `T` `P` `E`) or an exponent
//! (`e3`, `E-2`). Negative amounts are refused (no counter or capacity is
//! negative), as is anything above [`MAX_MILLI`] or finer than a
//! milli-unit.

use std::fmt;

/// The largest amount accepted, in milli-units: 2^63 - 1 milli-units,
/// about 9.2 × 10^15 units (8 PiB of bytes fits; the API server's own
/// 64-bit limit on plain values is 1000 times larger, but no counter or
/// capacity of a node's device comes near this).
pub const MAX_MILLI: i128 = i64::MAX as i128;

/// The longest quantity text accepted.
const MAX_TEXT: usize = 64;

/// Why a text is not a quantity this host accepts.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum QuantityError {
    /// Empty, too long, or not of the grammar.
    #[error("{0:?} is not a Kubernetes quantity (e.g. 80Gi, 7, 500m)")]
    Malformed(String),
    /// A minus sign.
    #[error("{0:?} is negative")]
    Negative(String),
    /// Above [`MAX_MILLI`].
    #[error("{0:?} is too large")]
    TooLarge(String),
    /// Has a part below a milli-unit.
    #[error("{0:?} is finer than a thousandth")]
    TooFine(String),
}

/// A non-negative amount in milli-units (`1Ki` = 1,024,000).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Quantity {
    milli: i128,
}

impl Quantity {
    /// Parses `text` (see the module docs).
    pub fn parse(text: &str) -> Result<Self, QuantityError> {
        let malformed = || QuantityError::Malformed(text.to_owned());
        if text.is_empty() || text.len() > MAX_TEXT {
            return Err(malformed());
        }
        if text.starts_with('-') {
            return Err(QuantityError::Negative(text.to_owned()));
        }
        let body = text.strip_prefix('+').unwrap_or(text);
        let number_end = body
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(body.len());
        let (number, suffix) = body.split_at(number_end);
        let (whole, fraction) = number.split_once('.').unwrap_or((number, ""));
        if whole.is_empty() && fraction.is_empty() || fraction.contains('.') {
            return Err(malformed());
        }
        // Scale: value = digits × 10^decimal_exponent × 1024^binary_power.
        let (decimal_exponent, binary_power): (i32, u32) = match suffix {
            "" => (0, 0),
            "Ki" => (0, 1),
            "Mi" => (0, 2),
            "Gi" => (0, 3),
            "Ti" => (0, 4),
            "Pi" => (0, 5),
            "Ei" => (0, 6),
            "n" => (-9, 0),
            "u" => (-6, 0),
            "m" => (-3, 0),
            "k" => (3, 0),
            "M" => (6, 0),
            "G" => (9, 0),
            "T" => (12, 0),
            "P" => (15, 0),
            "E" => (18, 0),
            exponent if exponent.starts_with(['e', 'E']) => {
                let digits = &exponent[1..];
                let unsigned = digits.strip_prefix(['+', '-']).unwrap_or(digits);
                if unsigned.is_empty() || !unsigned.bytes().all(|b| b.is_ascii_digit()) {
                    return Err(malformed());
                }
                let value: i32 = digits.parse().map_err(|_| malformed())?;
                (value, 0)
            }
            _ => return Err(malformed()),
        };
        let too_large = || QuantityError::TooLarge(text.to_owned());
        // All digits as one integer, the fraction's length moving the
        // decimal exponent; then to milli-units.
        let digits: String = format!("{whole}{fraction}");
        let digits = digits.trim_start_matches('0');
        if digits.len() > 30 {
            return Err(too_large());
        }
        let mut milli: i128 = if digits.is_empty() {
            0
        } else {
            digits.parse().map_err(|_| malformed())?
        };
        let fraction_len = i32::try_from(fraction.len()).map_err(|_| malformed())?;
        let exponent = decimal_exponent - fraction_len + 3;
        if milli != 0 {
            if exponent >= 0 {
                for _ in 0..exponent {
                    milli = milli.checked_mul(10).ok_or_else(too_large)?;
                    if milli > MAX_MILLI {
                        return Err(too_large());
                    }
                }
            } else {
                for _ in 0..(-exponent) {
                    if milli % 10 != 0 {
                        return Err(QuantityError::TooFine(text.to_owned()));
                    }
                    milli /= 10;
                }
            }
            for _ in 0..binary_power {
                milli = milli.checked_mul(1024).ok_or_else(too_large)?;
            }
        }
        if milli > MAX_MILLI {
            return Err(too_large());
        }
        Ok(Self { milli })
    }

    /// The amount in milli-units.
    pub fn milli(self) -> i128 {
        self.milli
    }

    /// Zero.
    pub const ZERO: Quantity = Quantity { milli: 0 };

    /// The sum, or `None` above [`MAX_MILLI`].
    pub fn checked_add(self, other: Quantity) -> Option<Quantity> {
        let milli = self.milli.checked_add(other.milli)?;
        (milli <= MAX_MILLI).then_some(Quantity { milli })
    }
}

impl fmt::Display for Quantity {
    /// Plain units, with a fraction only when there is one (`1.5`).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (units, rest) = (self.milli / 1000, self.milli % 1000);
        if rest == 0 {
            write!(f, "{units}")
        } else {
            let fraction = format!("{rest:03}");
            write!(f, "{units}.{}", fraction.trim_end_matches('0'))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn milli(text: &str) -> i128 {
        Quantity::parse(text).unwrap().milli()
    }

    #[test]
    fn reads_every_suffix_kind() {
        assert_eq!(milli("7"), 7_000);
        assert_eq!(milli("+7"), 7_000);
        assert_eq!(milli("500m"), 500);
        assert_eq!(milli("1.5"), 1_500);
        assert_eq!(milli("1Ki"), 1_024_000);
        assert_eq!(milli("80Gi"), 80 * (1i128 << 30) * 1000);
        assert_eq!(milli("10G"), 10_000_000_000_000);
        assert_eq!(milli("2e3"), 2_000_000);
        assert_eq!(milli("5E-1"), 500);
        assert_eq!(milli("0"), 0);
        assert_eq!(milli("0.5Ki"), 512_000);
        assert_eq!(Quantity::parse("1.5").unwrap().to_string(), "1.5");
        assert_eq!(Quantity::parse("10Gi").unwrap().to_string(), "10737418240");
    }

    #[test]
    fn refuses_what_the_api_server_would_not_take_or_a_device_cannot_have() {
        for (text, kind) in [
            ("", "malformed"),
            ("Gi", "malformed"),
            ("1.2.3", "malformed"),
            ("10 Gi", "malformed"),
            ("10gi", "malformed"),
            ("1e", "malformed"),
            ("-1", "negative"),
            ("99999999999999999999999999Ei", "too large"),
            ("9999999999Ei", "too large"),
            ("1n", "finer"),
            ("0.0001", "finer"),
        ] {
            let error = Quantity::parse(text).unwrap_err().to_string();
            let expected = match kind {
                "malformed" => "is not a Kubernetes quantity",
                "negative" => "is negative",
                "too large" => "is too large",
                _ => "is finer than a thousandth",
            };
            assert!(error.contains(expected), "{text:?}: {error}");
        }
    }
}
